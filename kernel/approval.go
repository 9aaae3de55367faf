package kernel

import (
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
)

// MaxApprovalTTL bounds how long an approval stays redeemable.
const MaxApprovalTTL = 24 * time.Hour

// Risks are the capability risk levels an approval may name.
var Risks = []string{"low", "medium", "high"}

// Approval is the state of one approval subject: an operator's consent to
// exactly one action digest at one risk, redeemable once before it expires.
// The zero value is an approval never granted.
type Approval struct {
	ApprovalID   string    `json:"approval_id"`
	ActionDigest string    `json:"action_digest"`
	Risk         string    `json:"risk"`
	Operator     string    `json:"operator"`
	ExpiresAt    time.Time `json:"expires_at"`
	// RedeemedBy is the operation that redeemed it; empty while unused.
	RedeemedBy string `json:"redeemed_by,omitempty"`
	// DeniedBy is the operator who denied it (a request answered no, or a
	// grant withdrawn before use), with why; a denied approval is never
	// redeemed.
	DeniedBy   string `json:"denied_by,omitempty"`
	DenyReason string `json:"deny_reason,omitempty"`
}

// Granted reports whether the approval exists (granted or denied).
func (a *Approval) Granted() bool { return a != nil && a.ApprovalID != "" }

// Denied reports whether an operator denied the approval.
func (a *Approval) Denied() bool { return a != nil && a.DeniedBy != "" }

// Approval event types.
const (
	TypeApprovalGranted  = "approval.granted"
	TypeApprovalRedeemed = "approval.redeemed"
	TypeApprovalDenied   = "approval.denied"
)

// ApprovalGranted records an operator's approval of one action digest at
// one risk, valid for GrantedAt <= t < ExpiresAt.
type ApprovalGranted struct {
	ApprovalID   string    `json:"approval_id"`
	ActionDigest string    `json:"action_digest"`
	Risk         string    `json:"risk"`
	Operator     string    `json:"operator"`
	Reason       string    `json:"reason,omitempty"`
	GrantedAt    time.Time `json:"granted_at"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// ApprovalRedeemed records the single use of an approval by an operation.
// It is appended in the same atomic batch as the operation's reservation,
// so an approval is consumed exactly when the action it approves is
// reserved.
type ApprovalRedeemed struct {
	ApprovalID   string `json:"approval_id"`
	OperationID  string `json:"operation_id"`
	ActionDigest string `json:"action_digest"`
}

// ApprovalDenied records an operator's refusal of one action digest at one
// risk: the answer to a pending approval request (a new approval id, denied
// from the start), or the withdrawal of an approval granted and not yet
// redeemed.
type ApprovalDenied struct {
	ApprovalID   string    `json:"approval_id"`
	ActionDigest string    `json:"action_digest"`
	Risk         string    `json:"risk"`
	Operator     string    `json:"operator"`
	Reason       string    `json:"reason"`
	DeniedAt     time.Time `json:"denied_at"`
}

// EventType implements Event.
func (ApprovalDenied) EventType() string { return TypeApprovalDenied }

// EventType implements Event.
func (ApprovalGranted) EventType() string { return TypeApprovalGranted }

// EventType implements Event.
func (ApprovalRedeemed) EventType() string { return TypeApprovalRedeemed }

func init() {
	register[ApprovalGranted](TypeApprovalGranted)
	register[ApprovalRedeemed](TypeApprovalRedeemed)
	register[ApprovalDenied](TypeApprovalDenied)
}

// Apply folds an approval event.
func (a *Approval) Apply(ev Event) error {
	switch e := ev.(type) {
	case ApprovalGranted:
		if a.Granted() {
			return fmt.Errorf("approval %s granted twice", a.ApprovalID)
		}
		if e.ApprovalID == "" || !validDigest(e.ActionDigest) || !e.ExpiresAt.After(e.GrantedAt) {
			return errors.New("malformed approval grant")
		}
		*a = Approval{ApprovalID: e.ApprovalID, ActionDigest: e.ActionDigest, Risk: e.Risk, Operator: e.Operator, ExpiresAt: e.ExpiresAt.UTC()}
	case ApprovalRedeemed:
		if !a.Granted() || e.ApprovalID != a.ApprovalID {
			return fmt.Errorf("redemption of approval %s that was not granted here", e.ApprovalID)
		}
		if a.RedeemedBy != "" {
			return fmt.Errorf("approval %s redeemed twice", a.ApprovalID)
		}
		if e.ActionDigest != a.ActionDigest {
			return fmt.Errorf("approval %s redeemed for another action", a.ApprovalID)
		}
		a.RedeemedBy = e.OperationID
	case ApprovalDenied:
		switch {
		case e.ApprovalID == "" || !validDigest(e.ActionDigest) || e.Operator == "" || e.Reason == "":
			return errors.New("malformed approval denial")
		case !a.Granted():
			*a = Approval{ApprovalID: e.ApprovalID, ActionDigest: e.ActionDigest, Risk: e.Risk}
		case e.ApprovalID != a.ApprovalID || e.ActionDigest != a.ActionDigest:
			return fmt.Errorf("denial of approval %s on the subject of %s", e.ApprovalID, a.ApprovalID)
		case a.RedeemedBy != "" || a.Denied():
			return fmt.Errorf("approval %s denied after it was redeemed or denied", a.ApprovalID)
		}
		a.DeniedBy, a.DenyReason = e.Operator, e.Reason
	default:
		return fmt.Errorf("event %T does not belong to an approval subject", ev)
	}
	return nil
}

// GrantApproval is an operator's approval command. Now is the decision
// time (the caller's clock); TTL is how long the approval stays valid.
type GrantApproval struct {
	ApprovalID   string
	ActionDigest string
	Risk         string
	Operator     string
	Reason       string
	Now          time.Time
	TTL          time.Duration
}

// DecideApprovalGrant grants a new approval. An approval id is granted
// once; the digest must be a hex SHA-256, the risk a known level and the
// TTL in (0, MaxApprovalTTL]. Errors carry CodeRequestMalformed.
func DecideApprovalGrant(a *Approval, c GrantApproval) Decision {
	switch {
	case c.ApprovalID == "" || c.Operator == "":
		return no(wire.CodeRequestMalformed, "an approval needs an id and its operator")
	case a.Granted():
		return no(wire.CodeRequestMalformed, "approval %s already exists", c.ApprovalID)
	case !validDigest(c.ActionDigest):
		return no(wire.CodeRequestMalformed, "action_digest must be 64 lowercase hex digits")
	case !validRisk(c.Risk):
		return no(wire.CodeRequestMalformed, "risk must be one of %v, not %q", Risks, c.Risk)
	case c.TTL <= 0 || c.TTL > MaxApprovalTTL:
		return no(wire.CodeRequestMalformed, "expires_in must be in (0, %s], not %s", MaxApprovalTTL, c.TTL)
	case c.Now.IsZero():
		return no(wire.CodeRequestMalformed, "an approval needs the decision time")
	}
	now := c.Now.UTC()
	return Decision{Events: []Event{ApprovalGranted{ApprovalID: c.ApprovalID, ActionDigest: c.ActionDigest, Risk: c.Risk,
		Operator: c.Operator, Reason: c.Reason, GrantedAt: now, ExpiresAt: now.Add(c.TTL)}}}
}

// RedeemApproval asks whether a proposal may proceed as far as approvals
// go. Required says whether the capability needs an approval; ApprovalID is
// what the proposal names (may be empty); ActionDigest and Risk are the
// proposal's; Now is the decision time.
type RedeemApproval struct {
	Required     bool
	ApprovalID   string
	ActionDigest string
	Risk         string
	OperationID  string
	Now          time.Time
}

// DecideApproval checks an approval for a proposal and redeems it. With no
// approval named, a required approval refuses with CodeApprovalRequired
// (the reason names the action digest to approve) and otherwise nothing
// happens. A named approval is always checked, required or not, in this
// order: it must exist (CodeApprovalRequired), not be denied
// (CodeApprovalDenied), bind exactly this action
// digest and risk (CodeApprovalMismatch), be unused (CodeApprovalRedeemed)
// and be unexpired at Now (CodeApprovalExpired). A valid approval yields
// the ApprovalRedeemed event, which the caller appends atomically with the
// reservation, or drops with everything else when a later check refuses.
func DecideApproval(a *Approval, c RedeemApproval) Decision {
	if c.ApprovalID == "" {
		if c.Required {
			return no(wire.CodeApprovalRequired, "capability of risk %s requires an operator approval of action digest %s", c.Risk, c.ActionDigest)
		}
		return Decision{}
	}
	switch {
	case !a.Granted() || a.ApprovalID != c.ApprovalID:
		return no(wire.CodeApprovalRequired, "approval %s was never granted; an operator must approve action digest %s", c.ApprovalID, c.ActionDigest)
	case a.Denied():
		return no(wire.CodeApprovalDenied, "approval %s was denied by %s: %s", c.ApprovalID, a.DeniedBy, a.DenyReason)
	case a.ActionDigest != c.ActionDigest:
		return no(wire.CodeApprovalMismatch, "approval %s binds action %s, not this action %s", c.ApprovalID, short(a.ActionDigest), short(c.ActionDigest))
	case a.Risk != c.Risk:
		return no(wire.CodeApprovalMismatch, "approval %s was given at risk %s, the capability's risk is %s", c.ApprovalID, a.Risk, c.Risk)
	case a.RedeemedBy != "":
		return no(wire.CodeApprovalRedeemed, "approval %s was already redeemed by operation %s", c.ApprovalID, a.RedeemedBy)
	case !c.Now.Before(a.ExpiresAt):
		return no(wire.CodeApprovalExpired, "approval %s expired at %s", c.ApprovalID, a.ExpiresAt.Format(time.RFC3339))
	}
	return Decision{Events: []Event{ApprovalRedeemed{ApprovalID: c.ApprovalID, OperationID: c.OperationID, ActionDigest: c.ActionDigest}}}
}

// DenyApproval is an operator's denial. With an ApprovalID that exists it
// withdraws that approval (ActionDigest and Risk, when given, must be its
// own); otherwise it answers a pending request for ActionDigest at Risk no,
// under the new ApprovalID.
type DenyApproval struct {
	ApprovalID   string
	ActionDigest string
	Risk         string
	Operator     string
	Reason       string
	Now          time.Time
}

// DecideApprovalDeny denies an approval. A reason is required; a redeemed
// approval can no longer be denied (CodeApprovalRedeemed); denying a denied
// one again changes nothing.
func DecideApprovalDeny(a *Approval, c DenyApproval) Decision {
	switch {
	case c.ApprovalID == "" || c.Operator == "":
		return no(wire.CodeRequestMalformed, "a denial needs the approval id and its operator")
	case c.Reason == "":
		return no(wire.CodeRequestMalformed, "a denial needs a reason")
	case c.Now.IsZero():
		return no(wire.CodeRequestMalformed, "a denial needs the decision time")
	}
	ev := ApprovalDenied{ApprovalID: c.ApprovalID, ActionDigest: c.ActionDigest, Risk: c.Risk, Operator: c.Operator, Reason: c.Reason, DeniedAt: c.Now.UTC()}
	if a.Granted() {
		switch {
		case a.Denied():
			return Decision{}
		case a.RedeemedBy != "":
			return no(wire.CodeApprovalRedeemed, "approval %s was already redeemed by operation %s; it can no longer be denied", a.ApprovalID, a.RedeemedBy)
		case c.ActionDigest != "" && c.ActionDigest != a.ActionDigest, c.Risk != "" && c.Risk != a.Risk:
			return no(wire.CodeApprovalMismatch, "approval %s binds action %s at risk %s", a.ApprovalID, short(a.ActionDigest), a.Risk)
		}
		ev.ActionDigest, ev.Risk = a.ActionDigest, a.Risk
		return Decision{Events: []Event{ev}}
	}
	switch {
	case !validDigest(c.ActionDigest):
		return no(wire.CodeRequestMalformed, "action_digest must be 64 lowercase hex digits")
	case !validRisk(c.Risk):
		return no(wire.CodeRequestMalformed, "risk must be one of %v, not %q", Risks, c.Risk)
	}
	return Decision{Events: []Event{ev}}
}

func validDigest(s string) bool { return len(s) == 64 && isLowerHex(s) }

func validRisk(r string) bool {
	for _, k := range Risks {
		if r == k {
			return true
		}
	}
	return false
}
