package kernel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// packCommand answers one command of a packs script over the catalog c,
// folding the events each decision records into it.
func packCommand(t *testing.T, c *PackCatalog, d *datadriven.TestData) string {
	arg := func(key, def string) string { return scenarioArg(d, key, def) }
	num := func(key string) int64 { return scenarioNum(t, d, key, 0) }
	apply := func(dec Decision) string {
		if dec.Refusal != nil {
			return fmt.Sprintf("refused %s: %s", dec.Refusal.Code, dec.Refusal.Reason)
		}
		if len(dec.Events) == 0 {
			return "no change"
		}
		var out []string
		for _, ev := range dec.Events {
			if err := c.Apply(ev); err != nil {
				d.Fatalf(t, "apply %T: %v", ev, err)
			}
			out = append(out, describePackEvent(ev))
		}
		return strings.Join(out, "\n")
	}
	switch d.Cmd {
	case "publish":
		// The input is a pack; version=V and max_tokens=N (of its first
		// bucket) change it.
		p, err := ParseContextPack([]byte(d.Input))
		if err != nil {
			return "parse: " + err.Error()
		}
		if v := arg("version", ""); v != "" {
			p.Version = v
		}
		if v := arg("max_tokens", ""); v != "" {
			p.Buckets = append([]ContextBucket(nil), p.Buckets...)
			p.Buckets[0].MaxTokens = num("max_tokens")
		}
		return apply(DecidePublishPack(c, PublishPack{Operator: arg("operator", "ops_alice"), Pack: p}))
	case "promote":
		// The evaluation's figures: cases, cand_fc, cand_fa, cur_fc,
		// cur_fa; eval=none sends none; measured=SPEC names the version the
		// figures were measured on instead of the candidate.
		cmd := PromotePack{Operator: arg("operator", "ops_alice"), Spec: arg("version", ""), AbstentionBoundBP: DefaultAbstentionBoundBP}
		if b := arg("bound_bp", ""); b != "" {
			cmd.AbstentionBoundBP = num("bound_bp")
		}
		if arg("eval", "") != "none" {
			cand, _ := c.Resolve(cmd.Spec)
			if m := arg("measured", ""); m != "" {
				cand, _ = c.Resolve(m)
			}
			cur, _ := c.Promoted()
			cmd.Eval = &ReleaseEval{CasesDigest: strings.Repeat("c", 64),
				Candidate: EvalFigures{Digest: cand.Digest, Cases: num("cases"), FalseClosures: num("cand_fc"), FalseAbstentions: num("cand_fa")},
				Current:   &EvalFigures{Digest: cur.Digest, Cases: num("cases"), FalseClosures: num("cur_fc"), FalseAbstentions: num("cur_fa")}}
			if v := arg("cur_cases", ""); v != "" {
				cmd.Eval.Current.Cases = num("cur_cases")
			}
		}
		return apply(DecidePromotePack(c, cmd))
	case "rollback":
		return apply(DecideRollbackPack(c, RollbackPack{Operator: arg("operator", "ops_alice")}))
	case "pin":
		// A run admitted with spec=SPEC (or none) pins this version.
		ref, r := PinPack(c, arg("spec", ""))
		switch {
		case r != nil:
			return fmt.Sprintf("refused %s: %s", r.Code, r.Reason)
		case ref == nil:
			return "pins nothing"
		}
		return "pins " + ref.String() + " " + ref.Digest[:12]
	case "catalog":
		var b strings.Builder
		for _, v := range c.Versions {
			fmt.Fprintf(&b, "%s %s by %s\n", v.PackRef, v.Digest[:12], v.Operator)
		}
		if v, ok := c.Promoted(); ok {
			fmt.Fprintf(&b, "promoted %s (%d promotion(s) on record)", v.PackRef, len(c.Promotions))
		} else {
			b.WriteString("promoted none")
		}
		return b.String()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func describePackEvent(ev Event) string {
	switch e := ev.(type) {
	case PackPublished:
		return fmt.Sprintf("%s %s %s by %s", e.EventType(), e.PackRef, e.Digest[:12], e.Operator)
	case PackPromoted:
		prev := "none"
		if e.Previous != "" {
			prev = e.Previous[:12]
		}
		return fmt.Sprintf("%s %s previous=%s by %s", e.EventType(), e.PackRef, prev, e.Operator)
	case PackRolledBack:
		return fmt.Sprintf("%s to %s from=%s by %s", e.EventType(), e.PackRef, e.From[:12], e.Operator)
	}
	return fmt.Sprintf("%T", ev)
}
