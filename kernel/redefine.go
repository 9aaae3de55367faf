package kernel

import (
	"fmt"
	"time"
)

// Guarantee modes. The zero value means ModeEnforce.
const (
	ModeEnforce = "enforce" // a reservation over the limit is refused
	ModeObserve = "observe" // a reservation over the limit is recorded as one that enforcement would refuse, and held
)

// MaxOverrides bounds the per-resource limits one guarantee may carry.
const MaxOverrides = 10_000

// TypeGuaranteeRedefined is a new version of a pinned guarantee's limit or
// mode, made by an operator at runtime.
const TypeGuaranteeRedefined = "guarantee.redefined"

// GuaranteeRedefined records version Version of a guarantee: a new default
// limit, or a limit for one resource (Resource set), or a new mode. Every
// replica decides against the latest version it reads in the same
// transaction as the reservation, never against its configuration file.
type GuaranteeRedefined struct {
	GuaranteeID string `json:"guarantee_id"`
	Version     uint64 `json:"version"`
	Resource    string `json:"resource,omitempty"` // a per-resource override when set
	Limit       int64  `json:"limit,omitempty"`    // 0: unchanged
	Mode        string `json:"mode,omitempty"`     // "": unchanged
	Operator    string `json:"operator"`
	Reason      string `json:"reason"`
	At          string `json:"at"` // RFC 3339, the decision time
}

// EventType implements Event.
func (GuaranteeRedefined) EventType() string { return TypeGuaranteeRedefined }

func init() { register[GuaranteeRedefined](TypeGuaranteeRedefined) }

// Redefine asks for a new version of a pinned guarantee.
type Redefine struct {
	GuaranteeID string
	Resource    string // "" for the guarantee's default limit
	Limit       int64  // 0 keeps the limit
	Mode        string // "" keeps the mode
	Operator    string
	Reason      string
	Now         time.Time
}

// DecideRedefine decides an operator's change of a pinned guarantee. A limit
// may go below what is committed and held: new reservations are then refused
// until capacity returns, and no hold is ever released by it.
func DecideRedefine(p *Pin, c Redefine) Decision {
	switch {
	case !p.Pinned():
		return no(CodeDefinitionMismatch, "guarantee %s is not pinned yet; it is pinned at its first use", c.GuaranteeID)
	case c.GuaranteeID != p.Definition.ID:
		return no(CodeRequestMalformed, "guarantee %s is not %s", c.GuaranteeID, p.Definition.ID)
	case c.Operator == "" || c.Reason == "":
		return no(CodeRequestMalformed, "a definition change must name its operator and a reason")
	case c.Limit == 0 && c.Mode == "":
		return no(CodeRequestMalformed, "a definition change must set a limit or a mode")
	case c.Limit < 0 || c.Limit > MaxAmount:
		return no(CodeDefinitionInvalid, "limit %d must be in 1..2^53-1", c.Limit)
	case c.Mode != "" && c.Mode != ModeEnforce && c.Mode != ModeObserve:
		return no(CodeDefinitionInvalid, "mode %q must be %q or %q", c.Mode, ModeEnforce, ModeObserve)
	case c.Resource != "" && c.Mode != "":
		return no(CodeDefinitionInvalid, "the mode is the guarantee's, not one resource's")
	case c.Resource != "" && c.Limit == 0:
		return no(CodeRequestMalformed, "a resource override must set a limit")
	}
	if c.Resource != "" {
		if _, ok := p.Overrides[c.Resource]; !ok && len(p.Overrides) >= MaxOverrides {
			return no(CodeDefinitionInvalid, "guarantee %s already has %d resource overrides, the maximum", c.GuaranteeID, MaxOverrides)
		}
	}
	cur := p.LimitFor(c.Resource)
	if c.Limit == cur && (c.Mode == "" || c.Mode == p.ModeOf()) {
		return Decision{} // the same version again changes nothing
	}
	return Decision{Events: []Event{GuaranteeRedefined{GuaranteeID: c.GuaranteeID, Version: p.CurrentVersion() + 1,
		Resource: c.Resource, Limit: c.Limit, Mode: c.Mode, Operator: c.Operator, Reason: c.Reason,
		At: c.Now.UTC().Format(time.RFC3339Nano)}}}
}

// CurrentVersion is the pin's definition version: 1 when pinned, one more
// for every redefinition.
func (p *Pin) CurrentVersion() uint64 {
	if !p.Pinned() {
		return 0
	}
	return 1 + p.Redefinitions
}

// LimitFor is the limit the latest version sets for a resource.
func (p *Pin) LimitFor(resource string) int64 {
	if l, ok := p.Overrides[resource]; ok && resource != "" {
		return l
	}
	if p.Limit != 0 {
		return p.Limit
	}
	return p.Definition.Limit
}

// ModeOf is the latest version's mode.
func (p *Pin) ModeOf() string {
	if p.Mode != "" {
		return p.Mode
	}
	if p.Definition.Mode != "" {
		return p.Definition.Mode
	}
	return ModeEnforce
}

// Bind returns the hold of a proposal on this guarantee as the latest
// version defines it: its limit, and whether the ceiling is only observed.
func (p *Pin) Bind(h Hold) Hold {
	if !p.Pinned() {
		return h
	}
	h.Limit = p.LimitFor(h.Resource)
	h.Observe = p.ModeOf() == ModeObserve
	return h
}

// Drift says how a configured definition differs from the stream's latest
// version in what an operator changes at runtime (limit, mode), or "" when
// it does not. The stream's version is the one used.
func (p *Pin) Drift(def Definition) string {
	if !p.Pinned() {
		return ""
	}
	var s string
	if def.Limit != p.LimitFor("") {
		s = fmt.Sprintf("limit %d (the stream's version %d has %d)", def.Limit, p.CurrentVersion(), p.LimitFor(""))
	}
	if m := modeOr(def.Mode); m != p.ModeOf() {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("mode %s (the stream's version %d has %s)", m, p.CurrentVersion(), p.ModeOf())
	}
	return s
}

func modeOr(m string) string {
	if m == "" {
		return ModeEnforce
	}
	return m
}

func (p *Pin) applyRedefined(e GuaranteeRedefined) error {
	if !p.Pinned() {
		return fmt.Errorf("redefinition of guarantee %s before it was pinned", e.GuaranteeID)
	}
	if e.GuaranteeID != p.Definition.ID || e.Version != p.CurrentVersion()+1 {
		return fmt.Errorf("redefinition %s v%d does not follow %s v%d", e.GuaranteeID, e.Version, p.Definition.ID, p.CurrentVersion())
	}
	if e.Limit < 0 || e.Limit > MaxAmount || (e.Mode != "" && e.Mode != ModeEnforce && e.Mode != ModeObserve) {
		return fmt.Errorf("redefinition %s v%d is invalid", e.GuaranteeID, e.Version)
	}
	switch {
	case e.Resource != "":
		if p.Overrides == nil {
			p.Overrides = map[string]int64{}
		}
		p.Overrides[e.Resource] = e.Limit
	case e.Limit != 0:
		p.Limit = e.Limit
	}
	if e.Mode != "" {
		p.Mode = e.Mode
	}
	p.Redefinitions++
	return nil
}
