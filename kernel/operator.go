package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
)

// Scope is a right an operator holds over a tenant. Persisted and
// configured names are the string values. The zero value is invalid.
type Scope string

// Scopes an operator may hold (docs/operations.md, "Operator scopes").
const (
	// ScopeRead: every verb that changes nothing (exposure, attempts,
	// approvals, incidents, audit and event exports, guarantee history,
	// the kill switch's and breakers' state).
	ScopeRead Scope = "read"
	// ScopeApprove: approve and deny a pending approval.
	ScopeApprove Scope = "approve"
	// ScopeRecover: reconcile, close-attempt, assert-absence and reset a
	// circuit breaker.
	ScopeRecover Scope = "recover"
	// ScopeResolve: publish evidence and resolve evidence conflicts
	// (evidence), resolve a log integrity incident (integrity-resolve).
	ScopeResolve Scope = "resolve"
	// ScopeLimits: guarantee limits and modes (guarantee-set-limit),
	// grants and revocations, run admissions and their budgets, context
	// pack versions (pack-publish, pack-promote, pack-rollback).
	ScopeLimits Scope = "limits"
	// ScopeKillSwitch: engage or release the tenant's kill switch.
	ScopeKillSwitch Scope = "kill_switch"
	// ScopeGuardrails: set and remove guardrails, grant waivers
	// (guardrail.go). Its own scope, not limits: a waiver lets proposals
	// through a fleet rule, which an operator who may raise a limit need
	// not be trusted with.
	ScopeGuardrails Scope = "guardrails"
)

// AllScopes lists every scope: what an operator configured without a
// scopes list holds.
var AllScopes = []Scope{ScopeRead, ScopeApprove, ScopeRecover, ScopeResolve, ScopeLimits, ScopeKillSwitch, ScopeGuardrails}

// ValidScope reports whether s names a scope.
func ValidScope(s string) bool { return slices.Contains(AllScopes, Scope(s)) }

// Two-person actions a tenant may hold for a second operator
// (TenantConfig.TwoPerson).
const (
	// TwoPersonAssertAbsence: every assert-absence.
	TwoPersonAssertAbsence = "assert_absence"
	// TwoPersonLimitRaise: a guarantee-set-limit whose new limit is above
	// the tenant's limit_raise_above.
	TwoPersonLimitRaise = "limit_raise"
)

// ValidTwoPerson reports whether s names a two-person action.
func ValidTwoPerson(s string) bool { return s == TwoPersonAssertAbsence || s == TwoPersonLimitRaise }

// verbScopes is the scope each operator verb needs. A verb that only
// changes something with a member set (kill-switch's engaged, breaker's
// reset) needs ScopeRead without it; changingScopes says what it needs
// with it. A verb in neither table needs every scope: a verb added without
// its scope here stays closed to every operator with a scopes list.
var verbScopes = map[string]Scope{
	"exposure": ScopeRead, "attempts": ScopeRead, wire.VerbApprovals: ScopeRead, wire.VerbIncidents: ScopeRead, wire.VerbDecisions: ScopeRead,
	"guarantee-history": ScopeRead, "run": ScopeRead, "integrity": ScopeRead,
	wire.VerbAuditExport: ScopeRead, wire.VerbAuditCheckpoints: ScopeRead, wire.VerbAuditKeys: ScopeRead,
	wire.VerbAuditProve: ScopeRead, wire.VerbAuditProveConsistency: ScopeRead, wire.VerbEventsExport: ScopeRead,
	wire.VerbExposureView: ScopeRead, wire.VerbReport: ScopeRead, VerbGuardrails: ScopeRead,

	"approve": ScopeApprove, "deny": ScopeApprove,
	"reconcile": ScopeRecover, "close-attempt": ScopeRecover, "assert-absence": ScopeRecover,
	"evidence": ScopeResolve, "integrity-resolve": ScopeResolve,
	"grant": ScopeLimits, "revoke": ScopeLimits, "guarantee-set-limit": ScopeLimits, "admit-run": ScopeLimits,
	wire.VerbPacks: ScopeRead, wire.VerbPackPublish: ScopeLimits, wire.VerbPackPromote: ScopeLimits, wire.VerbPackRollback: ScopeLimits,
	wire.VerbGuaranteeImport: ScopeLimits,
	VerbGuardrail:            ScopeGuardrails, VerbWaiver: ScopeGuardrails,
}

var changingScopes = map[string]Scope{"kill-switch": ScopeKillSwitch, wire.VerbBreaker: ScopeRecover}

// changeMembers are the members of a request body the scope rule reads:
// whether kill-switch or breaker changes something, and set-limit's limit.
type changeMembers struct {
	Engaged *bool `json:"engaged"`
	Reset   bool  `json:"reset"`
	Limit   int64 `json:"limit"`
}

// OperatorPolicy is a tenant's rule for its operators' actions: which of
// them need a second operator (TwoPerson: TwoPersonAssertAbsence,
// TwoPersonLimitRaise) and the limit above which a set-limit does.
type OperatorPolicy struct {
	TwoPerson       []string
	LimitRaiseAbove int64
	// RequestTTL is how long a two-person request may be confirmed after
	// it was made (DefaultRequestTTL when zero).
	RequestTTL time.Duration
}

// DefaultRequestTTL is a two-person request's time to live when the
// tenant's configuration names none.
const DefaultRequestTTL = time.Hour

// OperatorAction is one operator verb as it arrived: who (the subject's
// operator), the scopes the configuration gives them (nil: every scope),
// the verb and its body.
type OperatorAction struct {
	Operator string
	Scopes   []Scope
	Verb     string
	Body     []byte
}

// OperatorVerdict is DecideOperatorVerb's answer: the scope the action
// needs, and either a refusal, or whether it waits for a second operator
// (SecondOperator: record it as a request, act only on a confirmation),
// or neither (act now).
type OperatorVerdict struct {
	Scope          Scope
	Refusal        *Refusal
	SecondOperator bool
}

// holds reports whether scopes (nil: every scope) include s.
func holds(scopes []Scope, s Scope) bool { return scopes == nil || slices.Contains(scopes, s) }

// NeededScope returns the scope verb needs with body (the empty Scope:
// every scope, for a verb the table does not know).
func NeededScope(verb string, body []byte) Scope {
	if s, ok := verbScopes[verb]; ok {
		return s
	}
	if s, ok := changingScopes[verb]; ok {
		m, ok := members(body)
		if ok && m.Engaged == nil && !m.Reset {
			return ScopeRead
		}
		return s // a body the rule cannot read is taken to change something
	}
	return ""
}

// members reads the members the rule needs from body, leniently: the verb
// itself refuses a malformed body. An empty body sets none.
func members(body []byte) (changeMembers, bool) {
	var m changeMembers
	if len(strings.TrimSpace(string(body))) == 0 {
		return m, true
	}
	return m, json.Unmarshal(body, &m) == nil
}

// DecideOperatorVerb is the admission of every operator verb, before the
// verb's own step: the operator must hold the scope the verb needs
// (operator_scope_denied otherwise), and an action the tenant's two-person
// rule names waits for a second operator. Confirm is admitted here for
// any operator; DecideConfirm checks the confirmer's scope against the
// request's.
func DecideOperatorVerb(p OperatorPolicy, a OperatorAction) OperatorVerdict {
	if a.Verb == wire.VerbConfirm {
		return OperatorVerdict{}
	}
	need := NeededScope(a.Verb, a.Body)
	if need == "" {
		for _, s := range AllScopes {
			if !holds(a.Scopes, s) {
				return OperatorVerdict{Refusal: refuse(wire.CodeOperatorScopeDenied,
					"%s needs every scope and %s lacks %s", clip(a.Verb), a.Operator, s)}
			}
		}
		return OperatorVerdict{}
	}
	v := OperatorVerdict{Scope: need}
	if !holds(a.Scopes, need) {
		v.Refusal = refuse(wire.CodeOperatorScopeDenied, "%s needs the scope %s, which operator %s does not hold (holds %s)",
			a.Verb, need, a.Operator, scopeList(a.Scopes))
		return v
	}
	switch a.Verb {
	case "assert-absence":
		v.SecondOperator = slices.Contains(p.TwoPerson, TwoPersonAssertAbsence)
	case "guarantee-set-limit":
		if m, ok := members(a.Body); slices.Contains(p.TwoPerson, TwoPersonLimitRaise) && (!ok || m.Limit > p.LimitRaiseAbove) {
			v.SecondOperator = true
		}
	}
	return v
}

func scopeList(scopes []Scope) string {
	if len(scopes) == 0 {
		return "none"
	}
	s := make([]string, len(scopes))
	for i, x := range scopes {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// TypeOperatorRefused is the type of OperatorRefused.
const TypeOperatorRefused = "operator.refused"

// OperatorRefused records an operator verb refused, on the operator's
// refusal subject (ctx.ev.<tenant>.refusal.<operator>), beside the
// proposals' refusals of agents: who, which verb, the code and why. Reason
// and Verb are shortened as the views shorten (wire.Shorten, the digest of
// the whole in ReasonDigest); the body is kept as its digest and size.
type OperatorRefused struct {
	Operator     string    `json:"operator"`
	Verb         string    `json:"verb"`
	Code         wire.Code `json:"code"`
	Reason       string    `json:"reason"`
	ReasonDigest string    `json:"reason_digest,omitempty"`
	BodyDigest   string    `json:"body_digest"`
	BodyBytes    int       `json:"body_bytes"`
}

// EventType implements Event.
func (OperatorRefused) EventType() string { return TypeOperatorRefused }

// NewOperatorRefused builds the record of a refused operator verb, its
// fields bounded whatever the request carried.
func NewOperatorRefused(operator, verb string, body []byte, r *Refusal) OperatorRefused {
	verb, _ = wire.Shorten(verb)
	reason, digest := wire.Shorten(r.Reason)
	return OperatorRefused{Operator: operator, Verb: verb, Code: r.Code, Reason: reason, ReasonDigest: digest,
		BodyDigest: wire.Digest(string(body)), BodyBytes: len(body)}
}

// DecideRecordOperatorRefusal records a refused operator verb on the
// operator's refusal subject.
func DecideRecordOperatorRefusal(_ *RefusalLog, r OperatorRefused) Decision {
	return Decision{Events: []Event{r}}
}

// MaxOperatorRequestBody bounds the body a two-person request keeps until
// it is confirmed.
const MaxOperatorRequestBody = 4096

// TypeOperatorRequested is the type of OperatorRequested.
const TypeOperatorRequested = "operator.requested"

// OperatorRequested records an action the tenant's two-person rule holds
// for a second operator, on its own subject
// (ctx.ev.<tenant>.oprequest.<request_id>): the requester, the verb, the
// scope it needs and the request's body as sent, to be carried out as the
// requester asked once another operator confirms it.
type OperatorRequested struct {
	RequestID string `json:"request_id"`
	Operator  string `json:"operator"`
	Verb      string `json:"verb"`
	Scope     Scope  `json:"scope"`
	Body      string `json:"body"`
	// RequestedAt and ExpiresAt bound when it may be confirmed (absent
	// from requests recorded before requests expired: those never do).
	RequestedAt time.Time `json:"requested_at,omitzero"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
}

// EventType implements Event.
func (OperatorRequested) EventType() string { return TypeOperatorRequested }

// TypeOperatorConfirmed is the type of OperatorConfirmed.
const TypeOperatorConfirmed = "operator.confirmed"

// OperatorConfirmed records a second operator's confirmation of a request;
// the action is carried out after it is stored.
type OperatorConfirmed struct {
	RequestID string `json:"request_id"`
	Operator  string `json:"operator"`
}

// EventType implements Event.
func (OperatorConfirmed) EventType() string { return TypeOperatorConfirmed }

// OperatorRequest is the state of a request's subject: the request, and
// who confirmed it ("" while pending).
type OperatorRequest struct {
	Request     *OperatorRequested
	ConfirmedBy string
}

// Apply folds a request's events.
func (q *OperatorRequest) Apply(ev Event) error {
	switch e := ev.(type) {
	case OperatorRequested:
		if q.Request != nil {
			return fmt.Errorf("request %s made twice", e.RequestID)
		}
		q.Request = &e
	case OperatorConfirmed:
		if q.Request == nil || q.ConfirmedBy != "" || e.RequestID != q.Request.RequestID {
			return fmt.Errorf("confirmation of request %s out of order", e.RequestID)
		}
		q.ConfirmedBy = e.Operator
	default:
		return fmt.Errorf("event %T does not belong to an operator request", ev)
	}
	return nil
}

// RequestOperatorAction is the command that records an action held for a
// second operator (DecideOperatorVerb's SecondOperator).
type RequestOperatorAction struct {
	RequestID string
	Operator  string
	Verb      string
	Scope     Scope
	Body      []byte
	Now       time.Time
	TTL       time.Duration // DefaultRequestTTL when zero
}

// DecideOperatorRequest records a held action, its body at most
// MaxOperatorRequestBody bytes of UTF-8.
func DecideOperatorRequest(q *OperatorRequest, cmd RequestOperatorAction) Decision {
	switch {
	case q.Request != nil:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "request %s exists", cmd.RequestID)}
	case len(cmd.Body) > MaxOperatorRequestBody || !utf8.Valid(cmd.Body):
		return Decision{Refusal: refuse(wire.CodeRequestMalformed,
			"an action that needs a second operator takes a UTF-8 body of at most %d bytes, not %d", MaxOperatorRequestBody, len(cmd.Body))}
	}
	ttl := cmd.TTL
	if ttl <= 0 {
		ttl = DefaultRequestTTL
	}
	return Decision{Events: []Event{OperatorRequested{RequestID: cmd.RequestID, Operator: cmd.Operator, Verb: cmd.Verb,
		Scope: cmd.Scope, Body: string(cmd.Body), RequestedAt: cmd.Now.UTC(), ExpiresAt: cmd.Now.UTC().Add(ttl)}}}
}

// Confirm is a second operator's confirmation of a request.
type Confirm struct {
	RequestID string
	Operator  string
	Scopes    []Scope   // the confirmer's; nil: every scope
	Now       time.Time // the confirmation's time, against the request's expiry
}

// DecideConfirm is the two-person rule's second half: a pending request is
// confirmed, before it expires, only by another operator who holds the
// scope it needs.
func DecideConfirm(q *OperatorRequest, cmd Confirm) Decision {
	switch {
	case q.Request == nil:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "no request %s", clip(cmd.RequestID))}
	case q.ConfirmedBy != "":
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "request %s was confirmed by %s already", cmd.RequestID, q.ConfirmedBy)}
	case !q.Request.ExpiresAt.IsZero() && !cmd.Now.Before(q.Request.ExpiresAt):
		return Decision{Refusal: refuse(wire.CodeRequestExpired, "request %s (%s by %s) expired at %s: make it again",
			cmd.RequestID, q.Request.Verb, q.Request.Operator, q.Request.ExpiresAt.Format(time.RFC3339))}
	case q.Request.Operator == cmd.Operator:
		return Decision{Refusal: refuse(wire.CodeSecondOperatorRequired,
			"%s made request %s and cannot confirm it: another operator with the scope %s must", cmd.Operator, cmd.RequestID, q.Request.Scope)}
	case !holds(cmd.Scopes, q.Request.Scope):
		return Decision{Refusal: refuse(wire.CodeOperatorScopeDenied,
			"confirming %s (%s) needs the scope %s, which operator %s does not hold", cmd.RequestID, q.Request.Verb, q.Request.Scope, cmd.Operator)}
	}
	return Decision{Events: []Event{OperatorConfirmed{RequestID: cmd.RequestID, Operator: cmd.Operator}}}
}

func init() {
	register[OperatorRefused](TypeOperatorRefused)
	register[OperatorRequested](TypeOperatorRequested)
	register[OperatorConfirmed](TypeOperatorConfirmed)
}
