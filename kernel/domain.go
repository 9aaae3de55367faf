package kernel

import (
	"fmt"
	"slices"
	"time"

	"github.com/contextos/ledger/wire"
)

// The enforcement domain of a tenant is every guarantee pinned in its
// stream, with the capabilities each governs. Each pin records itself on the
// tenant's control subject (GuaranteeEnrolled) in the same decision, and
// every proposal already reads and guards that subject (the kill switch
// lives there), so the proposal step knows the domain as current as the kill
// switch at no extra read: a proposal of a capability the domain governs
// must hold every guarantee that governs it, or one that replaces it,
// whatever the configuration of the replica that decides it says.

// TypeGuaranteeEnrolled is the type of GuaranteeEnrolled.
const TypeGuaranteeEnrolled = "guarantee.enrolled"

// MaxReplacements bounds a chain of replacements (a guarantee that replaces
// one that replaces another...): every proposal of the newest reads the
// ledger of each on the resource.
const MaxReplacements = 8

// GuaranteeEnrolled records on the tenant's control subject that a pinned
// guarantee belongs to the enforcement domain: the definition and digest of
// its pin. It is appended with the pin (DecideEnroll), or once for a pin
// made before enrollment existed (DecideBackfill).
type GuaranteeEnrolled struct {
	Definition       Definition `json:"definition"`
	DefinitionDigest string     `json:"definition_digest"`
}

// EventType implements Event.
func (GuaranteeEnrolled) EventType() string { return TypeGuaranteeEnrolled }

func init() { register[GuaranteeEnrolled](TypeGuaranteeEnrolled) }

func (c *Control) applyEnrolled(e GuaranteeEnrolled) error {
	if r := e.Definition.Validate(); r != nil {
		return fmt.Errorf("enrollment of an invalid definition: %v", r)
	}
	if got := e.Definition.Digest(); got != e.DefinitionDigest {
		return fmt.Errorf("enrolled digest %s does not match definition digest %s", e.DefinitionDigest, got)
	}
	id := e.Definition.ID
	if _, ok := c.Domain[id]; ok {
		return fmt.Errorf("guarantee %s enrolled twice", id)
	}
	if c.Domain == nil {
		c.Domain = map[string]Pin{}
	}
	c.Domain[id] = Pin{Definition: e.Definition.normalized(), Digest: e.DefinitionDigest}
	return nil
}

// Enrolled returns the pin of a guarantee of the enforcement domain.
func (c *Control) Enrolled(id string) (Pin, bool) {
	if c == nil {
		return Pin{}, false
	}
	p, ok := c.Domain[id]
	return p, ok
}

// Replaced returns the guarantees that the enrolled guarantee id replaces,
// nearest first: the one its pin names, then the one that one's pin names,
// as far as they are enrolled (the last may be one never pinned).
func (c *Control) Replaced(id string) []string {
	p, ok := c.Enrolled(id)
	if !ok {
		return nil
	}
	return c.chain(p.Definition.Replaces)
}

// chain is r followed by the guarantees r replaces, bounded so a corrupt
// domain cannot loop.
func (c *Control) chain(r string) []string {
	var out []string
	for r != "" && len(out) <= MaxReplacements && !slices.Contains(out, r) {
		out = append(out, r)
		p, ok := c.Enrolled(r)
		if !ok {
			break
		}
		r = p.Definition.Replaces
	}
	return out
}

// PinState is what pinning a guarantee reads: its pin subject and the
// tenant's control subject, where the pin enrolls it in the domain.
type PinState struct {
	Pin     *Pin
	Control *Control
}

// PinDecision is DecideEnroll's and DecideBackfill's result: the events per
// subject.
type PinDecision struct {
	Pin     []Event
	Control []Event
	Refusal *Refusal
}

// DecideEnroll pins def for tenant on its first use (DecidePin) and enrolls
// the guarantee in the tenant's enforcement domain in the same decision. A
// guarantee pinned before enrollment existed is enrolled as pinned. A new
// pin is refused when a guarantee of the domain already replaced it (a
// replaced guarantee is never used again), or when it replaces an enrolled
// guarantee it cannot take over from (CheckReplacement).
func DecideEnroll(s PinState, tenant string, def Definition) PinDecision {
	d := DecidePin(s.Pin, tenant, def)
	if d.Refusal != nil {
		return PinDecision{Refusal: d.Refusal}
	}
	if len(d.Events) == 0 {
		return DecideBackfill(s)
	}
	if by := s.Control.replacedBy(def.ID); by != "" {
		return PinDecision{Refusal: refuse(wire.CodeDomainMismatch, "guarantee %s was replaced by %s, pinned in the tenant's stream; a replaced guarantee is not used again",
			def.ID, by)}
	}
	if r := s.Control.CheckReplacement(def); r != nil {
		return PinDecision{Refusal: r}
	}
	p := d.Events[0].(GuaranteePinned)
	return PinDecision{Pin: d.Events, Control: []Event{GuaranteeEnrolled{Definition: p.Definition, DefinitionDigest: p.DefinitionDigest}}}
}

// DecideBackfill enrolls a guarantee pinned before enrollment existed, as
// its pin defines it; an enrolled or unpinned one appends nothing.
func DecideBackfill(s PinState) PinDecision {
	if !s.Pin.Pinned() {
		return PinDecision{}
	}
	if _, ok := s.Control.Enrolled(s.Pin.Definition.ID); ok {
		return PinDecision{}
	}
	return PinDecision{Control: []Event{GuaranteeEnrolled{Definition: s.Pin.Definition, DefinitionDigest: s.Pin.Digest}}}
}

// replacedBy names an enrolled guarantee whose pin replaces id, or "".
func (c *Control) replacedBy(id string) string {
	if c == nil {
		return ""
	}
	by := ""
	for other, p := range c.Domain {
		if p.Definition.Replaces == id && (by == "" || other < by) {
			by = other
		}
	}
	return by
}

// CheckReplacement refuses a definition that names an enrolled guarantee in
// Replaces it cannot take over from: the exposure carried forward must be
// counted in the same unit and window, the new guarantee must govern every
// capability the old one did (else a proposal of the rest would escape both),
// and the chain it starts is at most MaxReplacements long. A guarantee never
// pinned has no exposure to carry: naming it is allowed.
func (c *Control) CheckReplacement(def Definition) *Refusal {
	if def.Replaces == "" {
		return nil
	}
	old, ok := c.Enrolled(def.Replaces)
	if !ok {
		return nil
	}
	o := old.Definition
	switch {
	case o.Unit != def.Unit:
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s replaces %s, counted in %s, not %s: its exposure cannot be carried forward", def.ID, o.ID, o.Unit, def.Unit)
	case o.Window != def.Window || o.TimeZone != def.TimeZone || o.Duration != def.Duration:
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s replaces %s, whose window is %q (time zone %q, duration %q), not %q (%q, %q): its exposure cannot be carried forward",
			def.ID, o.ID, o.Window, o.TimeZone, o.Duration, def.Window, def.TimeZone, def.Duration)
	}
	for _, cp := range o.CapabilityIDs {
		if !def.Covers(cp) {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s replaces %s but does not govern its capability %s", def.ID, o.ID, cp)
		}
	}
	if n := len(c.chain(def.Replaces)); n > MaxReplacements {
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s would end a chain of more than %d replaced guarantees", def.ID, MaxReplacements)
	}
	return nil
}

// CheckConfigured refuses configured definitions (each valid) that leave the
// tenant's enforcement domain: every capability of surfaced that a guarantee
// of the domain governs must be governed, in defs, by that guarantee or by
// one that replaces it. A guarantee may not be configured with one it
// replaces (a replaced guarantee is not used again), nor when the domain
// already replaced it, and a replacement must be one CheckReplacement
// allows. The refusals carry CodeDomainMismatch (CodeDefinitionInvalid for
// a replacement that cannot carry its exposure) and name the guarantee and
// the capability.
func (c *Control) CheckConfigured(defs []Definition, surfaced func(capabilityID string) bool) *Refusal {
	byID := make(map[string]Definition, len(defs))
	for _, d := range defs {
		byID[d.ID] = d
	}
	for _, d := range defs {
		if _, ok := byID[d.Replaces]; ok && d.Replaces != "" {
			return refuse(wire.CodeDomainMismatch, "guarantee %s replaces %s, which is configured too; a replaced guarantee is not used again: remove %s", d.ID, d.Replaces, d.Replaces)
		}
		if _, ok := c.Enrolled(d.ID); ok {
			continue // pinned already: DecidePin compares the definitions
		}
		if by := c.replacedBy(d.ID); by != "" {
			return refuse(wire.CodeDomainMismatch, "guarantee %s was replaced by %s, pinned in the stream; configure %s instead", d.ID, by, by)
		}
		if r := c.CheckReplacement(d); r != nil {
			return r
		}
	}
	var ids []string
	if c != nil {
		for id := range c.Domain {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := c.Domain[id]
		for _, cp := range p.Definition.CapabilityIDs {
			if !surfaced(cp) || c.configuredCovers(defs, id, cp) {
				continue
			}
			if d, ok := byID[id]; ok && !d.Covers(cp) {
				return refuse(wire.CodeDomainMismatch, "capability %s is governed by guarantee %s in the stream's pin, but not in this configuration's definition of %s", cp, id, id)
			}
			return refuse(wire.CodeDomainMismatch, "capability %s is governed by guarantee %s, pinned in the stream, which this configuration leaves out: "+
				"configure %s on every replica (with a new guarantee over the same capability, both then apply), or name it in the new guarantee's replaces = %q, which carries its exposure forward; "+
				"a new guarantee id without replaces starts every resource at its full limit", cp, id, id, id)
		}
	}
	return nil
}

// configuredCovers reports whether a configured definition governs cp as
// the enrolled guarantee id or as one that replaces it.
func (c *Control) configuredCovers(defs []Definition, id, cp string) bool {
	for _, d := range defs {
		if !d.Covers(cp) {
			continue
		}
		if d.ID == id {
			return true
		}
		chain := c.Replaced(d.ID)
		if _, ok := c.Enrolled(d.ID); !ok {
			chain = c.chain(d.Replaces)
		}
		if slices.Contains(chain, id) {
			return true
		}
	}
	return false
}

// checkHolds refuses a proposal of capabilityID that leaves the enforcement
// domain: every enrolled guarantee that governs the capability must be held,
// or a guarantee that replaces it; a hold of an enrolled guarantee must be
// under its pinned definition, of a capability it governs, and never beside
// a guarantee it replaces (whose ledger it reads instead).
func (c *Control) checkHolds(capabilityID string, holds []Hold) *Refusal {
	if c == nil || len(c.Domain) == 0 {
		return nil
	}
	for _, h := range holds {
		p, ok := c.Domain[h.GuaranteeID]
		switch {
		case !ok:
			continue
		case p.Digest != h.DefinitionDigest:
			return refuse(wire.CodeDomainMismatch, "guarantee %s is held under definition %s; the tenant's domain pins %s", h.GuaranteeID, short(h.DefinitionDigest), short(p.Digest))
		case !p.Definition.Covers(capabilityID):
			return refuse(wire.CodeDomainMismatch, "guarantee %s does not govern capability %s in the tenant's domain", h.GuaranteeID, capabilityID)
		}
		for _, r := range c.Replaced(h.GuaranteeID) {
			if holdsGuarantee(holds, r) {
				return refuse(wire.CodeDomainMismatch, "the proposal holds both %s and %s, which %s replaces", h.GuaranteeID, r, h.GuaranteeID)
			}
		}
	}
	missing := ""
	for id, p := range c.Domain {
		if !p.Definition.Covers(capabilityID) || holdsGuarantee(holds, id) || (missing != "" && id > missing) {
			continue
		}
		replaced := false
		for _, h := range holds {
			if slices.Contains(c.Replaced(h.GuaranteeID), id) {
				replaced = true
				break
			}
		}
		if !replaced {
			missing = id
		}
	}
	if missing != "" {
		return refuse(wire.CodeDomainMismatch, "capability %s is governed by guarantee %s, pinned in the tenant's stream, which this proposal does not hold: "+
			"the replica that decided it is configured without %s", capabilityID, missing, missing)
	}
	return nil
}

func holdsGuarantee(holds []Hold, id string) bool {
	for _, h := range holds {
		if h.GuaranteeID == id {
			return true
		}
	}
	return false
}

// LedgerKey names the resource ledger of a guarantee in a calendar window
// ("" for none).
type LedgerKey struct {
	GuaranteeID string
	Resource    string
	Window      string
}

// carried is what the guarantees h's guarantee replaces hold and committed
// on h's resource, in h's window: it counts against h's limit. Each of their
// ledgers must be in replaced; a runtime that did not read one is refused.
// Their exposure can only shrink once the replacement is enrolled (no
// proposal may hold a replaced guarantee any more, see checkHolds), so a
// ledger read earlier overstates it, never understates it.
func (c *Control) carried(h Hold, replaced map[LedgerKey]*Ledger, now time.Time) (int64, *Refusal) {
	var sum int64
	for _, id := range c.Replaced(h.GuaranteeID) {
		l := replaced[LedgerKey{GuaranteeID: id, Resource: h.Resource, Window: h.Window}]
		if l == nil {
			return 0, refuse(wire.CodeDomainMismatch, "guarantee %s replaces %s, whose exposure on the resource this runtime did not read", h.GuaranteeID, id)
		}
		committed := l.Committed
		if l.Rolling > 0 {
			committed = l.CommittedAt(now)
		}
		sum += committed + l.Held
	}
	return sum, nil
}
