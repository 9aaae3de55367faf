package tower

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// Request is a two-person request of a verified log still waiting for a
// second operator: recorded, not confirmed, not expired when read.
type Request struct {
	RequestID   string
	Operator    string // who asked
	Verb        string
	Scope       string // what its confirmer must hold
	Body        string // shortened (wire.Shorten)
	RequestedAt string
	ExpiresAt   string // "" for a request that never expires
}

// Decided is one operator decision of a verified log, as the runtime
// signed it: who, what, when.
type Decided struct {
	At       string
	Operator string
	What     string // approved, denied, confirmed, refused, guardrail set, ...
	Detail   string
}

// GuardrailView is a guardrail a verified log holds, with who set it when.
type GuardrailView struct {
	kernel.GuardrailSet
	At string
}

// Rule says what the guardrail refuses.
func (g GuardrailView) Rule() string {
	if g.Disabled {
		return "disabled"
	}
	return fmt.Sprintf("at most %d per proposal", g.MaxAmount)
}

// WaiverView is a waiver in force when the log was read.
type WaiverView struct {
	kernel.WaiverGranted
}

// For names the run or resource the waiver lets through.
func (w WaiverView) For() string {
	if w.RunID != "" {
		return "run " + w.RunID
	}
	s, _ := wire.Shorten(w.Resource)
	return "resource " + s
}

// review fills the view's review queue, decision history, guardrails and
// waivers from the verified records: every figure is what the runtime
// signed, never what it answers about itself.
func (t *Tower) review(v *LogView, e audit.Entries) {
	now := t.Now()
	pending := map[string]Request{}
	var order []string
	var hist []Decided
	ctl := &kernel.Control{}
	guardAt := map[string]string{}
	for _, raw := range e.Records {
		_, env, err := audit.Parse(raw)
		if err != nil {
			continue
		}
		switch env.Type {
		case kernel.TypeOperatorRequested, kernel.TypeOperatorConfirmed, kernel.TypeOperatorRefused,
			kernel.TypeApprovalGranted, kernel.TypeApprovalDenied, kernel.TypeKillSwitchSet,
			kernel.TypeGuardrailSet, kernel.TypeWaiverGranted, kernel.TypeWaiverRevoked:
		default:
			continue
		}
		ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
		if err != nil {
			continue
		}
		at := env.Time
		if ts, err := time.Parse(time.RFC3339Nano, at); err == nil {
			at = ts.UTC().Format(time.RFC3339)
		}
		add := func(op, what, detail string) {
			hist = append(hist, Decided{At: at, Operator: op, What: what, Detail: detail})
		}
		switch x := ev.(type) {
		case kernel.OperatorRequested:
			body, _ := wire.Shorten(x.Body)
			q := Request{RequestID: x.RequestID, Operator: x.Operator, Verb: x.Verb, Scope: string(x.Scope), Body: body, RequestedAt: at}
			if !x.ExpiresAt.IsZero() {
				q.ExpiresAt = x.ExpiresAt.UTC().Format(time.RFC3339)
			}
			if x.ExpiresAt.IsZero() || now.Before(x.ExpiresAt) {
				pending[x.RequestID] = q
				order = append(order, x.RequestID)
			}
			add(x.Operator, "requested "+x.Verb, "request "+x.RequestID+", waits for a second operator with "+string(x.Scope))
		case kernel.OperatorConfirmed:
			detail := "request " + x.RequestID
			if q, ok := pending[x.RequestID]; ok {
				detail += " (" + q.Verb + " by " + q.Operator + ")"
			}
			delete(pending, x.RequestID)
			add(x.Operator, "confirmed", detail)
		case kernel.OperatorRefused:
			add(x.Operator, "refused "+x.Verb, string(x.Code)+": "+x.Reason)
		case kernel.ApprovalGranted:
			add(x.Operator, "approved", "action "+short(x.ActionDigest)+" ("+x.Risk+"), until "+x.ExpiresAt.UTC().Format(time.RFC3339)+reasonOf(x.Reason))
		case kernel.ApprovalDenied:
			add(x.Operator, "denied", "action "+short(x.ActionDigest)+reasonOf(x.Reason))
		case kernel.KillSwitchSet:
			add(x.Operator, map[bool]string{true: "engaged the kill switch", false: "released the kill switch"}[x.Engaged], strings.TrimPrefix(reasonOf(x.Reason), ": "))
		case kernel.GuardrailSet:
			if x.Removed {
				add(x.Operator, "removed guardrail "+x.GuardrailID, strings.TrimPrefix(reasonOf(x.Reason), ": "))
			} else {
				add(x.Operator, "set guardrail "+x.GuardrailID, x.CapabilityID+": "+GuardrailView{GuardrailSet: x}.Rule()+reasonOf(x.Reason))
				guardAt[x.GuardrailID] = at
			}
			_ = ctl.Apply(x)
		case kernel.WaiverGranted:
			add(x.Operator, "granted waiver "+x.WaiverID, "of "+x.GuardrailID+" for "+WaiverView{x}.For()+" until "+x.Until.UTC().Format(time.RFC3339)+reasonOf(x.Reason))
			_ = ctl.Apply(x)
		case kernel.WaiverRevoked:
			add(x.Operator, "revoked waiver "+x.WaiverID, strings.TrimPrefix(reasonOf(x.Reason), ": "))
			_ = ctl.Apply(x)
		}
	}
	for _, id := range order {
		if q, ok := pending[id]; ok {
			v.Requests = append(v.Requests, q)
		}
	}
	limit := t.cfg.MaxRowsPerTenant
	if len(v.Requests) > limit {
		v.MoreRequests, v.Requests = len(v.Requests)-limit, v.Requests[:limit]
	}
	if len(hist) > limit {
		v.MoreHistory, hist = len(hist)-limit, hist[len(hist)-limit:]
	}
	v.History = make([]Decided, len(hist))
	for i := range hist { // latest first
		v.History[i] = hist[len(hist)-1-i]
	}
	for id, g := range ctl.Guardrails {
		v.Guardrails = append(v.Guardrails, GuardrailView{GuardrailSet: g, At: guardAt[id]})
	}
	sort.Slice(v.Guardrails, func(i, j int) bool { return v.Guardrails[i].GuardrailID < v.Guardrails[j].GuardrailID })
	for _, w := range ctl.Waivers {
		if !now.Before(w.GrantedAt) && now.Before(w.Until) {
			v.Waivers = append(v.Waivers, WaiverView{w})
		}
	}
	sort.Slice(v.Waivers, func(i, j int) bool { return v.Waivers[i].WaiverID < v.Waivers[j].WaiverID })
}

func reasonOf(r string) string {
	if r == "" {
		return ""
	}
	s, _ := wire.Shorten(r)
	return ": " + s
}
