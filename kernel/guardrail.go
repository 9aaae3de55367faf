package kernel

import (
	"fmt"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
)

// Guardrails are fleet rules on a tenant's control subject: a capability
// disabled, or a cap on what one proposal of a capability may bind. Tower
// publishes the same guardrail to every runtime of a tenant through the
// guardrail verb, as the operator logged into it; each runtime's kernel
// enforces it beside the kill switch (CheckControl). A waiver is a signed,
// time-bounded exception to one guardrail for a named run or resource.

// The operator verbs of guardrails: list them and the waivers in force
// (read), set or remove one, grant a waiver (ScopeGuardrails).
const (
	VerbGuardrails = "guardrails"
	VerbGuardrail  = "guardrail"
	VerbWaiver     = "waiver"
)

// Bounds of the control subject's guardrails and waivers: no operator can
// grow a tenant's control state (which every proposal reads) without bound.
const (
	MaxGuardrails     = 64
	MaxWaivers        = 256 // in force at once
	MaxWaiverDuration = 7 * 24 * time.Hour
	maxControlReason  = 512
)

// TypeGuardrailSet is the type of GuardrailSet.
const TypeGuardrailSet = "control.guardrail"

// GuardrailSet sets (or, Removed, removes) a guardrail of the tenant:
// Disabled refuses every proposal of the capability, MaxAmount (> 0) every
// proposal binding more than it on any guarantee or from its run budget.
type GuardrailSet struct {
	GuardrailID  string `json:"guardrail_id"`
	CapabilityID string `json:"capability_id,omitempty"`
	Disabled     bool   `json:"disabled,omitempty"`
	MaxAmount    int64  `json:"max_amount,omitempty"`
	Removed      bool   `json:"removed,omitempty"`
	Operator     string `json:"operator"`
	Reason       string `json:"reason,omitempty"`
}

// EventType implements Event.
func (GuardrailSet) EventType() string { return TypeGuardrailSet }

// TypeWaiverGranted is the type of WaiverGranted.
const TypeWaiverGranted = "control.waiver"

// WaiverGranted lets the proposals of one run (RunID) or on one resource
// (Resource) through one guardrail from GrantedAt until Until (exclusive).
type WaiverGranted struct {
	WaiverID    string    `json:"waiver_id"`
	GuardrailID string    `json:"guardrail_id"`
	RunID       string    `json:"run_id,omitempty"`
	Resource    string    `json:"resource,omitempty"`
	GrantedAt   time.Time `json:"granted_at"`
	Until       time.Time `json:"until"`
	Operator    string    `json:"operator"`
	Reason      string    `json:"reason,omitempty"`
}

// EventType implements Event.
func (WaiverGranted) EventType() string { return TypeWaiverGranted }

// TypeWaiverRevoked is the type of WaiverRevoked.
const TypeWaiverRevoked = "control.waiver_revoked"

// WaiverRevoked ends a waiver before its Until: from RevokedAt on it lets
// nothing through.
type WaiverRevoked struct {
	WaiverID  string    `json:"waiver_id"`
	RevokedAt time.Time `json:"revoked_at"`
	Operator  string    `json:"operator"`
	Reason    string    `json:"reason,omitempty"`
}

// EventType implements Event.
func (WaiverRevoked) EventType() string { return TypeWaiverRevoked }

func init() {
	register[GuardrailSet](TypeGuardrailSet)
	register[WaiverGranted](TypeWaiverGranted)
	register[WaiverRevoked](TypeWaiverRevoked)
}

func (c *Control) applyGuardrail(e GuardrailSet) error {
	if e.Removed {
		delete(c.Guardrails, e.GuardrailID)
		for id, w := range c.Waivers {
			if w.GuardrailID == e.GuardrailID {
				delete(c.Waivers, id)
			}
		}
		return nil
	}
	if c.Guardrails == nil {
		c.Guardrails = map[string]GuardrailSet{}
	}
	c.Guardrails[e.GuardrailID] = e
	return nil
}

func (c *Control) applyWaiver(e WaiverGranted) error {
	if _, ok := c.Guardrails[e.GuardrailID]; !ok {
		return fmt.Errorf("waiver %s of unknown guardrail %s", e.WaiverID, e.GuardrailID)
	}
	// Waivers that ended before this one was granted are forgotten: the
	// state holds those in force, the stream and the audit keep them all.
	for id, w := range c.Waivers {
		if !w.Until.After(e.GrantedAt) {
			delete(c.Waivers, id)
		}
	}
	if c.Waivers == nil {
		c.Waivers = map[string]WaiverGranted{}
	}
	c.Waivers[e.WaiverID] = e
	return nil
}

func (c *Control) applyWaiverRevoked(e WaiverRevoked) error {
	if _, ok := c.Waivers[e.WaiverID]; !ok {
		return fmt.Errorf("revocation of unknown waiver %s", e.WaiverID)
	}
	delete(c.Waivers, e.WaiverID)
	return nil
}

// SetGuardrail is the command of the guardrail verb.
type SetGuardrail struct {
	GuardrailID  string
	CapabilityID string
	Disabled     bool
	MaxAmount    int64
	Remove       bool
	Operator     string
	Reason       string
}

// DecideGuardrail sets or removes a guardrail: a guardrail names a
// capability and exactly one rule (disabled, or a positive max amount);
// setting one to what it is changes nothing; a tenant holds at most
// MaxGuardrails.
func DecideGuardrail(c *Control, cmd SetGuardrail) Decision {
	c = orNew(c)
	if err := ValidToken(cmd.GuardrailID); err != nil {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "guardrail_id: %v", err)}
	}
	if len(cmd.Reason) > maxControlReason || !utf8.ValidString(cmd.Reason) {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "reason: at most %d bytes of UTF-8", maxControlReason)}
	}
	old, exists := c.Guardrails[cmd.GuardrailID]
	if cmd.Remove {
		if !exists {
			return Decision{Refusal: refuse(wire.CodeRequestMalformed, "no guardrail %s", cmd.GuardrailID)}
		}
		return Decision{Events: []Event{GuardrailSet{GuardrailID: cmd.GuardrailID, Removed: true, Operator: cmd.Operator, Reason: cmd.Reason}}}
	}
	switch {
	case cmd.CapabilityID == "" || len(cmd.CapabilityID) > 128 || !utf8.ValidString(cmd.CapabilityID):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "capability_id: 1 to 128 bytes of UTF-8")}
	case cmd.Disabled == (cmd.MaxAmount != 0):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "a guardrail is either disabled or a positive max_amount")}
	case cmd.MaxAmount < 0:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "max_amount must be positive, not %d", cmd.MaxAmount)}
	case !exists && len(c.Guardrails) >= MaxGuardrails:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "the tenant holds %d guardrails, the most it may", MaxGuardrails)}
	case exists && old.CapabilityID == cmd.CapabilityID && old.Disabled == cmd.Disabled && old.MaxAmount == cmd.MaxAmount:
		return Decision{}
	}
	return Decision{Events: []Event{GuardrailSet{GuardrailID: cmd.GuardrailID, CapabilityID: cmd.CapabilityID, Disabled: cmd.Disabled,
		MaxAmount: cmd.MaxAmount, Operator: cmd.Operator, Reason: cmd.Reason}}}
}

// GrantWaiver is the command of the waiver verb.
type GrantWaiver struct {
	WaiverID    string
	GuardrailID string
	RunID       string
	Resource    string
	Until       time.Time
	Now         time.Time
	Operator    string
	Reason      string
}

// DecideWaiver grants a waiver: of a guardrail the tenant holds, for a run
// or a resource (one of them), ending after Now and at most
// MaxWaiverDuration after it, with a reason; at most MaxWaivers are in
// force at once.
func DecideWaiver(c *Control, cmd GrantWaiver) Decision {
	c = orNew(c)
	if err := ValidToken(cmd.WaiverID); err != nil {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "waiver_id: %v", err)}
	}
	inForce := 0
	for _, w := range c.Waivers {
		if w.Until.After(cmd.Now) {
			inForce++
		}
	}
	switch {
	case c.Guardrails[cmd.GuardrailID].GuardrailID == "":
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "no guardrail %s", clip(cmd.GuardrailID))}
	case (cmd.RunID == "") == (cmd.Resource == ""):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "a waiver names a run_id or a resource, one of them")}
	case len(cmd.RunID) > 128 || len(cmd.Resource) > 512 || !utf8.ValidString(cmd.RunID+cmd.Resource):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "run_id (at most 128 bytes) or resource (at most 512) of UTF-8")}
	case cmd.Reason == "" || len(cmd.Reason) > maxControlReason || !utf8.ValidString(cmd.Reason):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "a waiver states its reason, at most %d bytes of UTF-8", maxControlReason)}
	case !cmd.Until.After(cmd.Now) || cmd.Until.Sub(cmd.Now) > MaxWaiverDuration:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "a waiver ends after now and within %s, not at %s", MaxWaiverDuration, cmd.Until.UTC().Format(time.RFC3339))}
	case c.Waivers[cmd.WaiverID].Until.After(cmd.Now):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "waiver %s is in force", cmd.WaiverID)}
	case inForce >= MaxWaivers:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "%d waivers are in force, the most a tenant may hold", MaxWaivers)}
	}
	return Decision{Events: []Event{WaiverGranted{WaiverID: cmd.WaiverID, GuardrailID: cmd.GuardrailID, RunID: cmd.RunID, Resource: cmd.Resource,
		GrantedAt: cmd.Now.UTC(), Until: cmd.Until.UTC(), Operator: cmd.Operator, Reason: cmd.Reason}}}
}

// RevokeWaiver is the command of the waiver verb with revoke set.
type RevokeWaiver struct {
	WaiverID string
	Now      time.Time
	Operator string
	Reason   string
}

// DecideRevokeWaiver ends a waiver in force at Now; one that ended, or was
// never granted, is refused.
func DecideRevokeWaiver(c *Control, cmd RevokeWaiver) Decision {
	c = orNew(c)
	if err := ValidToken(cmd.WaiverID); err != nil {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "waiver_id: %v", err)}
	}
	if len(cmd.Reason) > maxControlReason || !utf8.ValidString(cmd.Reason) {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "reason: at most %d bytes of UTF-8", maxControlReason)}
	}
	if w, ok := c.Waivers[cmd.WaiverID]; !ok || !w.Until.After(cmd.Now) {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "no waiver %s in force", cmd.WaiverID)}
	}
	return Decision{Events: []Event{WaiverRevoked{WaiverID: cmd.WaiverID, RevokedAt: cmd.Now.UTC(), Operator: cmd.Operator, Reason: cmd.Reason}}}
}

// Guarded is what the tenant's controls read of a proposal: its
// capability and run, the resources and amounts of its holds, what it
// consumes from its run, and the decision time.
type Guarded struct {
	CapabilityID string
	RunID        string
	Holds        []Hold
	RunAmount    int64
	Now          time.Time
}

// CheckControl is the tenant's controls over a proposal, the check
// ProposeStep makes first after the operation: the kill switch,
// then every guardrail of the capability (in id order) that no waiver in
// force covers. A nil control refuses nothing.
func CheckControl(c *Control, g Guarded) *Refusal {
	if c == nil {
		return nil
	}
	if c.Engaged {
		return refuse(wire.CodeKillSwitchEngaged, "the tenant's kill switch is engaged")
	}
	if len(c.Guardrails) == 0 {
		return nil
	}
	ids := make([]string, 0, len(c.Guardrails))
	for id, gr := range c.Guardrails {
		if gr.CapabilityID == g.CapabilityID {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		gr := c.Guardrails[id]
		var why string
		if gr.Disabled {
			why = fmt.Sprintf("%s is disabled", g.CapabilityID)
		} else if amt, res := g.largest(); amt > gr.MaxAmount {
			why = fmt.Sprintf("the proposal binds %d%s, over the cap of %d per proposal of %s", amt, res, gr.MaxAmount, g.CapabilityID)
		}
		if why == "" || c.waived(id, g) {
			continue
		}
		r := refuse(wire.CodeGuardrailRefused, "guardrail %s (by %s", id, gr.Operator)
		if gr.Reason != "" {
			r.Reason += ": " + gr.Reason
		}
		r.Reason += "): " + why
		return r
	}
	return nil
}

// largest is the proposal's largest amount, with where it is bound.
func (g Guarded) largest() (int64, string) {
	amt, where := g.RunAmount, " from its run"
	for _, h := range g.Holds {
		if h.Amount > amt {
			amt, where = h.Amount, " on "+h.GuaranteeID
		}
	}
	return amt, where
}

// waived reports whether a waiver in force at g.Now covers the proposal's
// run or one of its resources for guardrail id.
func (c *Control) waived(id string, g Guarded) bool {
	for _, w := range c.Waivers {
		if w.GuardrailID != id || g.Now.Before(w.GrantedAt) || !g.Now.Before(w.Until) {
			continue
		}
		if w.RunID != "" && w.RunID == g.RunID {
			return true
		}
		if w.Resource != "" && slices.ContainsFunc(g.Holds, func(h Hold) bool { return h.Resource == w.Resource }) {
			return true
		}
	}
	return false
}
