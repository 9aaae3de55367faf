package kernel

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
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
// limit, or a limit for one resource (Resource set), or a new mode. It is
// stored on the tenant's control subject, which every reservation reads and
// guards in its own transaction, so every replica decides against the
// latest version in the stream, never against its configuration file.
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

// GuaranteeVersion is what the redefinitions of one guarantee set on top of
// its pinned definition.
type GuaranteeVersion struct {
	Redefinitions uint64           `json:"redefinitions"`
	Limit         int64            `json:"limit,omitempty"` // 0 while the pinned one holds
	Mode          string           `json:"mode,omitempty"`  // "" while the pinned one holds
	Overrides     map[string]int64 `json:"overrides,omitempty"`
}

// RedefineState is what a redefinition reads: the guarantee's pin (never
// changed by it) and the tenant's control subject, where it is appended.
type RedefineState struct {
	Pin     *Pin
	Control *Control
}

// DecideRedefine decides an operator's change of a pinned guarantee. A limit
// may go below what is committed and held: new reservations are then refused
// until capacity returns, and no hold is ever released by it.
func DecideRedefine(s RedefineState, c Redefine) Decision {
	p := s.Pin
	switch {
	case !p.Pinned():
		return no(wire.CodeDefinitionMismatch, "guarantee %s is not pinned yet; it is pinned at its first use", c.GuaranteeID)
	case c.GuaranteeID != p.Definition.ID:
		return no(wire.CodeRequestMalformed, "guarantee %s is not %s", c.GuaranteeID, p.Definition.ID)
	case c.Operator == "" || c.Reason == "":
		return no(wire.CodeRequestMalformed, "a definition change must name its operator and a reason")
	case c.Limit == 0 && c.Mode == "":
		return no(wire.CodeRequestMalformed, "a definition change must set a limit or a mode")
	case c.Limit < 0 || c.Limit > MaxAmount:
		return no(wire.CodeDefinitionInvalid, "limit %d must be in 1..2^53-1", c.Limit)
	case c.Mode != "" && c.Mode != ModeEnforce && c.Mode != ModeObserve:
		return no(wire.CodeDefinitionInvalid, "mode %q must be %q or %q", c.Mode, ModeEnforce, ModeObserve)
	case c.Resource != "" && c.Mode != "":
		return no(wire.CodeDefinitionInvalid, "the mode is the guarantee's, not one resource's")
	case c.Resource != "" && c.Limit == 0:
		return no(wire.CodeRequestMalformed, "a resource override must set a limit")
	}
	v := s.Control.version(c.GuaranteeID)
	if c.Resource != "" {
		if _, ok := v.Overrides[c.Resource]; !ok && len(v.Overrides) >= MaxOverrides {
			return no(wire.CodeDefinitionInvalid, "guarantee %s already has %d resource overrides, the maximum", c.GuaranteeID, MaxOverrides)
		}
	}
	sameLimit := c.Limit == 0 || c.Limit == s.Control.LimitFor(p, c.Resource)
	sameMode := c.Mode == "" || c.Mode == s.Control.ModeOf(p)
	if sameLimit && sameMode {
		return Decision{} // the same version again changes nothing
	}
	return Decision{Events: []Event{GuaranteeRedefined{GuaranteeID: c.GuaranteeID, Version: s.Control.Version(p) + 1,
		Resource: c.Resource, Limit: c.Limit, Mode: c.Mode, Operator: c.Operator, Reason: c.Reason,
		At: c.Now.UTC().Format(time.RFC3339Nano)}}}
}

func (c *Control) version(id string) GuaranteeVersion {
	if c == nil || c.Guarantees == nil {
		return GuaranteeVersion{}
	}
	return c.Guarantees[id]
}

// Version is the guarantee's definition version: 1 when pinned, one more
// for every redefinition.
func (c *Control) Version(p *Pin) uint64 {
	if !p.Pinned() {
		return 0
	}
	return 1 + c.version(p.Definition.ID).Redefinitions
}

// LimitFor is the limit the latest version of the pinned guarantee sets for
// a resource.
func (c *Control) LimitFor(p *Pin, resource string) int64 {
	v := c.version(p.Definition.ID)
	if l, ok := v.Overrides[resource]; ok && resource != "" {
		return l
	}
	if v.Limit != 0 {
		return v.Limit
	}
	return p.Definition.Limit
}

// ModeOf is the latest version's mode of the pinned guarantee.
func (c *Control) ModeOf(p *Pin) string {
	if m := c.version(p.Definition.ID).Mode; m != "" {
		return m
	}
	return modeOr(p.Definition.Mode)
}

// Bind returns a hold as the latest version of its guarantee defines it:
// the limit and whether the ceiling is only observed. The hold comes with
// its pinned limit and mode (PinnedHold); a guarantee never redefined keeps
// them.
func (c *Control) Bind(h Hold) Hold {
	if c == nil {
		return h
	}
	v, ok := c.Guarantees[h.GuaranteeID]
	if !ok {
		return h
	}
	if l, ok := v.Overrides[h.Resource]; ok {
		h.Limit = l
	} else if v.Limit != 0 {
		h.Limit = v.Limit
	}
	if v.Mode != "" {
		h.Observe = v.Mode == ModeObserve
	}
	return h
}

// Drift says how a configured definition differs from the stream's latest
// version in what an operator changes at runtime (limit, mode), or "" when
// it does not. The stream's version is the one used.
func (c *Control) Drift(p *Pin, def Definition) string {
	if !p.Pinned() {
		return ""
	}
	var s string
	if l := c.LimitFor(p, ""); def.Limit != l {
		s = fmt.Sprintf("limit %d (the stream's version %d has %d)", def.Limit, c.Version(p), l)
	}
	if m := modeOr(def.Mode); m != c.ModeOf(p) {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("mode %s (the stream's version %d has %s)", m, c.Version(p), c.ModeOf(p))
	}
	return s
}

func modeOr(m string) string {
	if m == "" {
		return ModeEnforce
	}
	return m
}

func (c *Control) applyRedefined(e GuaranteeRedefined) error {
	v := c.version(e.GuaranteeID)
	if e.Version != v.Redefinitions+2 {
		return fmt.Errorf("redefinition %s v%d does not follow v%d", e.GuaranteeID, e.Version, v.Redefinitions+1)
	}
	if e.Limit < 0 || e.Limit > MaxAmount || (e.Mode != "" && e.Mode != ModeEnforce && e.Mode != ModeObserve) ||
		(e.Resource != "" && (e.Limit == 0 || e.Mode != "")) {
		return fmt.Errorf("redefinition %s v%d is invalid", e.GuaranteeID, e.Version)
	}
	switch {
	case e.Resource != "":
		if _, ok := v.Overrides[e.Resource]; !ok && len(v.Overrides) >= MaxOverrides {
			return fmt.Errorf("redefinition %s v%d exceeds %d overrides", e.GuaranteeID, e.Version, MaxOverrides)
		}
		o := make(map[string]int64, len(v.Overrides)+1)
		for k, l := range v.Overrides {
			o[k] = l
		}
		o[e.Resource] = e.Limit
		v.Overrides = o
	case e.Limit != 0:
		v.Limit = e.Limit
	}
	if e.Mode != "" {
		v.Mode = e.Mode
	}
	v.Redefinitions++
	if c.Guarantees == nil {
		c.Guarantees = map[string]GuaranteeVersion{}
	}
	c.Guarantees[e.GuaranteeID] = v
	return nil
}

// PinnedHold is a hold on the pinned guarantee, with version 1's limit and
// mode; Control.Bind applies the later versions.
func (p *Pin) PinnedHold(resource string, amount int64) Hold {
	rolling, _ := p.Definition.RollingSeconds()
	return Hold{GuaranteeID: p.Definition.ID, DefinitionDigest: p.Digest, Resource: resource, Amount: amount,
		Limit: p.Definition.Limit, Observe: p.Definition.Mode == ModeObserve, Rolling: rolling}
}
