package kernel

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// Authority is the state of a tenant's authority subject: the operator
// grants and revocations recorded over the configured grants. For each
// (principal, capability) the latest AuthorityChanged overrides the
// configuration; with none, the configuration decides. The zero value has
// no overrides.
type Authority struct {
	Overrides map[string]AuthorityChanged `json:"overrides"`
}

// TypeAuthorityChanged is the type of AuthorityChanged.
const TypeAuthorityChanged = "authority.changed"

// AuthorityChanged records an operator's grant (Granted) or revocation of a
// capability to a principal. It takes effect for every proposal decided
// after it was stored.
type AuthorityChanged struct {
	Principal    string `json:"principal"`
	CapabilityID string `json:"capability_id"`
	Granted      bool   `json:"granted"`
	Operator     string `json:"operator"`
	Reason       string `json:"reason,omitempty"`
}

// EventType implements Event.
func (AuthorityChanged) EventType() string { return TypeAuthorityChanged }

func init() { register[AuthorityChanged](TypeAuthorityChanged) }

func authorityKey(principal, capabilityID string) string { return principal + "\x00" + capabilityID }

// Apply folds an authority event.
func (a *Authority) Apply(ev Event) error {
	e, ok := ev.(AuthorityChanged)
	if !ok {
		return fmt.Errorf("event %T does not belong to an authority subject", ev)
	}
	if e.Principal == "" || e.CapabilityID == "" || e.Operator == "" {
		return errors.New("authority change without principal, capability or operator")
	}
	if a.Overrides == nil {
		a.Overrides = map[string]AuthorityChanged{}
	}
	a.Overrides[authorityKey(e.Principal, e.CapabilityID)] = e
	return nil
}

// ChangeAuthority is an operator's grant or revocation.
type ChangeAuthority struct {
	Principal    string
	CapabilityID string
	Grant        bool
	Operator     string
	Reason       string
}

// DecideAuthorityChange records a grant or revocation. The caller has
// checked that the principal is an agent of the tenant and the capability
// is surfaced. Repeating the latest change of the pair is a no-op; any
// other change is recorded, even one that agrees with the configuration, so
// that the operator's intent survives a later configuration change.
func DecideAuthorityChange(a *Authority, c ChangeAuthority) Decision {
	if c.Principal == "" || c.CapabilityID == "" || c.Operator == "" {
		return no(wire.CodeRequestMalformed, "a grant or revocation names a principal, a capability and the operator")
	}
	if prev, ok := a.Overrides[authorityKey(c.Principal, c.CapabilityID)]; ok && prev.Granted == c.Grant {
		return Decision{}
	}
	return Decision{Events: []Event{AuthorityChanged{Principal: c.Principal, CapabilityID: c.CapabilityID,
		Granted: c.Grant, Operator: c.Operator, Reason: c.Reason}}}
}

// CheckAuthority decides whether principal holds capabilityID: the latest
// operator change of the pair if there is one, else the configuration
// (configured says whether the configuration grants it). It returns the
// source of the authority, recorded in the decision's controls, or a
// refusal with CodeAuthorityDenied.
func CheckAuthority(a *Authority, principal, capabilityID string, configured bool) (string, *Refusal) {
	if a != nil {
		if e, ok := a.Overrides[authorityKey(principal, capabilityID)]; ok {
			if e.Granted {
				return "grant:" + principal + ":" + capabilityID + ":operator:" + e.Operator, nil
			}
			return "", refuse(wire.CodeAuthorityDenied, "%s's grant of %s was revoked by operator %s", principal, capabilityID, e.Operator)
		}
	}
	if configured {
		return "config:" + principal + ":" + capabilityID, nil
	}
	return "", refuse(wire.CodeAuthorityDenied, "%s holds no grant for %s", principal, capabilityID)
}
