package kernel

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// guardrailWorld is a tenant's control subject with guardrails and
// waivers, at a clock the script moves.
type guardrailWorld struct {
	c   Control
	now time.Time
}

func (w *guardrailWorld) run(t *testing.T, d *datadriven.TestData) string {
	c, now := &w.c, w.now
	arg := func(key string) string { return scenarioArg(d, key, "") }
	num := func(key string) int64 { return scenarioNum(t, d, key, 0) }
	apply := func(dec Decision) string {
		if dec.Refusal != nil {
			return fmt.Sprintf("refused %s: %s", dec.Refusal.Code, dec.Refusal.Reason)
		}
		if len(dec.Events) == 0 {
			return "unchanged"
		}
		var out []string
		for _, ev := range dec.Events {
			if err := c.Apply(ev); err != nil {
				d.Fatalf(t, "%v", err)
			}
			out = append(out, ev.EventType())
		}
		return "recorded " + strings.Join(out, ", ")
	}
	switch d.Cmd {
	case "advance":
		dur, err := time.ParseDuration(arg("by"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		w.now = now.Add(dur)
		return w.now.Format(time.RFC3339)
	case "kill-switch":
		return apply(DecideKillSwitch(c, SetKillSwitch{Engaged: arg("engaged") == "true", Operator: arg("operator")}))
	case "guardrail":
		return apply(DecideGuardrail(c, SetGuardrail{GuardrailID: arg("id"), CapabilityID: arg("capability"), Disabled: arg("disabled") == "true",
			MaxAmount: num("max_amount"), Remove: arg("remove") == "true", Operator: arg("operator"), Reason: arg("reason")}))
	case "waiver":
		dur, err := time.ParseDuration(arg("for"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		return apply(DecideWaiver(c, GrantWaiver{WaiverID: arg("id"), GuardrailID: arg("guardrail"), RunID: arg("run"), Resource: arg("resource"),
			Until: now.Add(dur), Now: now, Operator: arg("operator"), Reason: arg("reason")}))
	case "revoke-waiver":
		return apply(DecideRevokeWaiver(c, RevokeWaiver{WaiverID: arg("id"), Now: now, Operator: arg("operator"), Reason: arg("reason")}))
	case "propose":
		g := Guarded{CapabilityID: arg("capability"), RunID: arg("run"), RunAmount: num("run_amount"), Now: now}
		if r := arg("resource"); r != "" {
			g.Holds = []Hold{{GuaranteeID: "refund_ceiling", Resource: r, Amount: num("amount")}}
		}
		if r := CheckControl(c, g); r != nil {
			return fmt.Sprintf("refused %s: %s", r.Code, r.Reason)
		}
		return "admitted"
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}
