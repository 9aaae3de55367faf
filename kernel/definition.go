package kernel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/contextos/ledger/wire"
)

// Definition is the semantic definition of a shared guarantee: which
// capabilities it covers, where the resource and amount are read from in the
// bound arguments, its ceiling and unit. The first use of (tenant, ID) pins
// the whole definition; any later difference fails closed.
type Definition struct {
	ID              string   `json:"id"`
	CapabilityIDs   []string `json:"capability_ids"`
	ResourcePointer string   `json:"resource_pointer"`
	AmountPointer   string   `json:"amount_pointer"`
	Limit           int64    `json:"limit"`
	Unit            string   `json:"unit"`
	// Mode is ModeEnforce (the default, "") or ModeObserve.
	Mode string `json:"mode,omitempty"`
	// Window is "" (one ceiling for all time), a calendar window (day,
	// week, month in TimeZone, "" meaning UTC) or WindowRolling over
	// Duration (a Go duration such as "24h").
	Window   string `json:"window,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
	Duration string `json:"duration,omitempty"`
	// ResourceForm, when set, refuses resource ids outside the form
	// (look-alikes). Omitted when empty, so definitions without one keep
	// the digest they were pinned with.
	ResourceForm ResourceForm `json:"resource_form,omitempty"`
	// Replaces names the guarantee this one takes over from: what is
	// committed and held under it on a resource counts against this one's
	// limit on the same resource (ProposeStep reads its ledger). Omitted when
	// empty, so definitions without one keep the digest they were pinned
	// with.
	Replaces string `json:"replaces,omitempty"`
}

// Validate checks the definition: a token id, at least one capability, valid
// RFC 6901 pointers, a positive integer limit no larger than MaxAmount and a
// unit. Errors carry CodeDefinitionInvalid.
func (d Definition) Validate() *Refusal {
	if err := ValidToken(d.ID); err != nil {
		return refuse(wire.CodeDefinitionInvalid, "guarantee id: %v", err)
	}
	if len(d.CapabilityIDs) == 0 {
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s covers no capability", d.ID)
	}
	for _, c := range d.CapabilityIDs {
		if c == "" {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s names an empty capability id", d.ID)
		}
	}
	for _, p := range []struct{ name, ptr string }{{"resource_pointer", d.ResourcePointer}, {"amount_pointer", d.AmountPointer}} {
		parsed, err := ParsePointer(p.ptr)
		if err != nil {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s %s: %v", d.ID, p.name, err)
		}
		if len(parsed) == 0 {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s %s must select a member, not the whole document", d.ID, p.name)
		}
	}
	if d.Limit <= 0 || d.Limit > MaxAmount {
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s limit %d must be in 1..2^53-1", d.ID, d.Limit)
	}
	if d.Unit == "" {
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s has no unit", d.ID)
	}
	if r := d.validateWindow(); r != nil {
		return r
	}
	if d.Mode != "" && d.Mode != ModeEnforce && d.Mode != ModeObserve {
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s mode %q must be %q or %q", d.ID, d.Mode, ModeEnforce, ModeObserve)
	}
	if !d.ResourceForm.Valid() {
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s resource_form must be \"ascii-token\" or \"nfc\", not %q", d.ID, string(d.ResourceForm))
	}
	if d.Replaces != "" {
		if err := ValidToken(d.Replaces); err != nil {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s replaces: %v", d.ID, err)
		}
		if d.Replaces == d.ID {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s replaces itself", d.ID)
		}
	}
	return nil
}

// Covers reports whether the definition governs the capability.
func (d Definition) Covers(capabilityID string) bool {
	return slices.Contains(d.CapabilityIDs, capabilityID)
}

// normalized returns the definition with capability ids sorted and
// de-duplicated: their order carries no meaning, so it must not change the
// digest.
func (d Definition) normalized() Definition {
	caps := slices.Clone(d.CapabilityIDs)
	slices.Sort(caps)
	d.CapabilityIDs = slices.Compact(caps)
	return d
}

// Digest returns the hex SHA-256 of the definition's canonical (JCS) form.
// Two definitions have the same digest exactly when they have the same
// semantics.
func (d Definition) Digest() string {
	s, err := Digest(d.normalized())
	if err != nil {
		// A Definition is plain strings and integers; encoding cannot fail.
		panic("kernel: definition digest: " + err.Error())
	}
	return s
}

// ParseDefinition decodes a definition strictly (unknown fields, trailing
// data and invalid values are refused) and validates it.
func ParseDefinition(b []byte) (Definition, error) {
	var d Definition
	if err := StrictJSON(b, &d); err != nil {
		return Definition{}, fmt.Errorf("guarantee definition: %w", err)
	}
	if r := d.Validate(); r != nil {
		return Definition{}, r
	}
	return d, nil
}

// Extract reads the resource and the amount from bound arguments (decoded by
// DecodeArguments). The resource must be a non-empty string within the
// definition's ResourceForm and is used as is; the amount must satisfy
// ParseAmount.
func (d Definition) Extract(args map[string]any) (resource string, amount int64, r *Refusal) {
	rp, err := ParsePointer(d.ResourcePointer)
	if err != nil {
		return "", 0, refuse(wire.CodeDefinitionInvalid, "resource_pointer: %v", err)
	}
	v, _ := rp.Eval(args)
	s, ok := v.(string)
	if !ok || s == "" {
		return "", 0, refuse(wire.CodeResourceInvalid, "value at %s must be a non-empty string, got %s", d.ResourcePointer, describe(v))
	}
	if r := d.ResourceForm.CheckResource(s); r != nil {
		r.Reason = "value at " + d.ResourcePointer + ": " + r.Reason
		return "", 0, r
	}
	ap, err := ParsePointer(d.AmountPointer)
	if err != nil {
		return "", 0, refuse(wire.CodeDefinitionInvalid, "amount_pointer: %v", err)
	}
	av, _ := ap.Eval(args)
	amount, r = ParseAmount(av)
	if r != nil {
		r.Reason = "value at " + d.AmountPointer + ": " + r.Reason
		return "", 0, r
	}
	return s, amount, nil
}

func describe(v any) string {
	if s, ok := v.(string); ok && s == "" {
		return "an empty string"
	}
	return jsonKind(v)
}

// Pin is the pinned definition of (Tenant, Definition.ID): version 1 of the
// guarantee. What it means (capabilities, pointers, unit) never changes; its
// limit and mode are versioned on the tenant's control subject
// (GuaranteeRedefined).
type Pin struct {
	Tenant     string     `json:"tenant"`
	Definition Definition `json:"definition"`
	Digest     string     `json:"definition_digest"`
}

// DecidePin decides whether def may be used under tenant given the current
// pin (nil when the guarantee was never used). The first use returns a
// GuaranteePinned event; a later identical definition returns no event; any
// difference is refused with CodeDefinitionMismatch.
func DecidePin(current *Pin, tenant string, def Definition) Decision {
	if r := def.Validate(); r != nil {
		return Decision{Refusal: r}
	}
	digest := def.Digest()
	if !current.Pinned() {
		return Decision{Events: []Event{GuaranteePinned{Tenant: tenant, Definition: def.normalized(), DefinitionDigest: digest}}}
	}
	// The limit and the mode are versioned in the stream: a configuration
	// that differs only there is not a new meaning (Control.Drift says how).
	def.Limit, def.Mode = current.Definition.Limit, current.Definition.Mode
	if digest = def.Digest(); current.Digest != digest {
		return Decision{Refusal: refuse(wire.CodeDefinitionMismatch,
			"guarantee %s is pinned to definition %s; the configured definition %s differs", def.ID, short(current.Digest), short(digest))}
	}
	return Decision{}
}

// Apply folds a GuaranteePinned event into the pin; it refuses a second pin
// and a pin whose digest does not match its definition.
func (p *Pin) Apply(ev Event) error {
	e, ok := ev.(GuaranteePinned)
	if !ok {
		return fmt.Errorf("event %T does not belong to a guarantee pin", ev)
	}
	if p.Digest != "" {
		return errors.New("guarantee already pinned")
	}
	if got := e.Definition.Digest(); got != e.DefinitionDigest {
		return fmt.Errorf("pinned digest %s does not match definition digest %s", e.DefinitionDigest, got)
	}
	*p = Pin{Tenant: e.Tenant, Definition: e.Definition, Digest: e.DefinitionDigest}
	return nil
}

// Pinned reports whether the pin holds a definition.
func (p *Pin) Pinned() bool { return p != nil && p.Digest != "" }

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
