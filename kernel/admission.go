package kernel

import "github.com/contextos/ledger/wire"

// AdmitKind is what a request asks of the runtime: its reasons name it.
type AdmitKind int

const (
	// AdmitProposal is an agent's proposal.
	AdmitProposal AdmitKind = iota
	// AdmitCompile is an agent's compile request: it takes the same rate
	// tokens and the same share of the lane as its proposals.
	AdmitCompile
	// AdmitOperator is an operator's verb.
	AdmitOperator
)

// Verdict is a fact admission reads only once the steps before it have
// passed, since measuring it acts: the rate limiter spends a token, the
// lane queues the request.
type Verdict int

const (
	// Unmeasured is a fact the door has not measured yet.
	Unmeasured Verdict = iota
	// Passed is a measured fact that lets the request on.
	Passed
	// Failed is a measured fact that stops it.
	Failed
)

// VerdictOf is the verdict of a measured fact.
func VerdictOf(ok bool) Verdict {
	if ok {
		return Passed
	}
	return Failed
}

// AdmitInput is what a door knows of a request before admission decides
// it: who sends it (as the door authenticated them), what the tenant's
// configuration says of them, the body's size and bound, and the rate and
// lane facts measured so far.
type AdmitInput struct {
	Kind              AdmitKind
	Tenant, Principal string
	TenantKnown       bool
	// IsOperator: Principal is one of the tenant's operators.
	IsOperator bool
	// Size is the body's length in bytes, MaxSize the runtime's bound
	// (max_proposal_bytes).
	Size, MaxSize int
	// Rate is the principal's rate limiter's verdict, Lane whether the
	// tenant's lane (the kind's share) took the request.
	Rate, Lane Verdict
}

// Admission is admission's answer so far: a refusal with nothing queued,
// the next fact to measure, or (Next and Refusal both empty) the request
// queued in the lane. Oversized, when set, is the body bound's refusal: the
// lane's worker records and answers it instead of running the request.
type Admission struct {
	Refusal   *Refusal
	Next      Measure
	Oversized *Refusal
}

// Measure names the fact a door measures next.
type Measure int

// The facts admission asks a door to measure, in its order.
const (
	MeasureNone Measure = iota
	MeasureRate
	MeasureLane
)

// Admit is the one admission step every request takes, whatever its door,
// in this order:
//
//  1. identity: an unknown tenant, the name ops, or (for an operator
//     verb) a name that is not one of the tenant's operators is refused
//     authority_denied;
//  2. body bound: a body over MaxSize spends no rate token; it goes to the
//     lane, whose worker records its request_malformed refusal (Oversized);
//  3. per-principal rate: rate_limited, nothing stored;
//  4. per-tenant lane: overloaded when the kind's share is full, nothing
//     stored.
//
// A door calls Admit, measures the fact Next names, and calls it again
// until Next is MeasureNone.
func Admit(in AdmitInput) Admission {
	switch {
	case !in.TenantKnown:
		return Admission{Refusal: refuse(wire.CodeAuthorityDenied, "unknown tenant")}
	case in.Principal == "ops":
		return Admission{Refusal: refuse(wire.CodeAuthorityDenied, "ops is not a principal")}
	case in.Kind == AdmitOperator && !in.IsOperator:
		return Admission{Refusal: refuse(wire.CodeAuthorityDenied, "%s is not an operator of tenant %s", in.Principal, in.Tenant)}
	}
	var oversized *Refusal
	if in.Size > in.MaxSize {
		oversized = refuse(wire.CodeRequestMalformed, "%s of %d bytes exceeds %d", admitWhat[in.Kind], in.Size, in.MaxSize)
	}
	what, who := "proposals", "proposal"
	if in.Kind == AdmitOperator {
		what, who = "requests", "operator"
	}
	if oversized == nil {
		switch in.Rate {
		case Unmeasured:
			return Admission{Next: MeasureRate}
		case Failed:
			return Admission{Refusal: refuse(wire.CodeRateLimited,
				"more %s than %s's rate limit allows; nothing was stored, slow down", what, in.Principal)}
		}
	}
	switch in.Lane {
	case Unmeasured:
		return Admission{Next: MeasureLane, Oversized: oversized}
	case Failed:
		return Admission{Refusal: refuse(wire.CodeOverloaded,
			"tenant %s has every %s worker busy and its queue full; nothing was stored, retry later", in.Tenant, who)}
	}
	return Admission{Oversized: oversized}
}

// admitWhat names a request in the body bound's refusal.
var admitWhat = map[AdmitKind]string{AdmitProposal: "proposal", AdmitCompile: "compile request", AdmitOperator: "operator request"}

// CheckOperator refuses a verb whose sender is not one of the tenant's
// operators (tenantKnown false: the tenant is not configured).
func CheckOperator(tenantKnown, isOperator bool, operator, tenant string) *Refusal {
	if !tenantKnown || !isOperator {
		return refuse(wire.CodeAuthorityDenied, "%s is not an operator of tenant %s", operator, tenant)
	}
	return nil
}

// CheckReplySubject refuses a request whose reply subject is outside the
// principal's inbox: answering it would publish where the principal may
// not read.
func CheckReplySubject(reply, tenant, principal string) *Refusal {
	if !wire.ReplyAllowed(reply, tenant, principal) {
		return refuse(wire.CodeRequestMalformed, "reply subject outside the principal's inbox %s.>", wire.InboxPrefix(tenant, principal))
	}
	return nil
}

// OperatorReplyRefused is the record of an operator verb's refused reply:
// the refusal the verb's step decided, as the reply carries it.
func OperatorReplyRefused(operator, verb string, body []byte, reply wire.OpReply) OperatorRefused {
	return NewOperatorRefused(operator, verb, body, &Refusal{Code: reply.Code, Reason: reply.Reason})
}
