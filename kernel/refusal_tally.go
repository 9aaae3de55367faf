package kernel

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/contextos/ledger/wire"
)

// A flood of refusals is recorded in bounded space. Within a window, the
// first refusal of each RefusalKey is recorded whole (a refused proposal's
// operation: opened, refused, its decision record); the rest are only
// counted, and at the window's end one signed ProposalRefused per key says
// how many there were and describes the last. A counted refusal appends
// nothing at once: it held, consumed, redeemed and changed nothing, so no
// balance, replay or audit of a state change depends on it.

// talliedCodes are the refusals that may be counted: those of a proposal
// decided before anything is held, which an agent can repeat as fast as its
// rate allows. approval_required is not among them (it is the request an
// operator approves, with its arguments), nor are incidents (contention, a
// fenced executor, a contradicted seal), which are always recorded whole.
var talliedCodes = map[wire.Code]bool{
	wire.CodeRequestMalformed: true, wire.CodeCapabilityNotSurfaced: true,
	wire.CodeAuthorityDenied: true, wire.CodePolicyDenied: true,
	wire.CodeApprovalMismatch: true, wire.CodeApprovalRedeemed: true, wire.CodeApprovalExpired: true, wire.CodeApprovalDenied: true,
	wire.CodeEvidenceInsufficient: true, wire.CodeRunBudgetExhausted: true, wire.CodeKillSwitchEngaged: true,
	wire.CodeResourceInvalid: true, wire.CodeAmountInvalid: true, wire.CodeExceeded: true,
	wire.CodeDefinitionMismatch: true, wire.CodeDefinitionInvalid: true, wire.CodeReceiptsSaturated: true,
	wire.CodeAttemptClosed: true, wire.CodeAttemptKnown: true, wire.CodeUnresolvedAttempt: true,
	wire.CodeBreakerOpen: true, wire.CodeDomainMismatch: true,
	wire.CodeLogIntegrityFailed: true, wire.CodeLogUnwitnessed: true,
}

// Tallied reports whether refusals with code may be counted into their
// window's aggregate rather than each recorded whole.
func Tallied(code wire.Code) bool { return talliedCodes[code] }

// RefusalKey is what refusals are counted by. Its fields must come from a
// bounded set (configured agents and capabilities, the code catalog); the
// caller maps anything else to "", so the tally's size is bounded by the
// configuration, never by what agents send.
type RefusalKey struct {
	Principal    string
	Code         wire.Code
	CapabilityID string
}

// RefusalWindow is a runtime's view of its current refusal window, which
// a proposal step reads: whether a refusal of k is to be recorded whole
// (RefusalTally.Whole).
type RefusalWindow interface {
	Whole(k RefusalKey) bool
}

// RefusalTally is the refusals of one tenant in the current window. The
// zero value is an empty window. It is not safe for concurrent use.
type RefusalTally struct {
	open map[RefusalKey]*tallied
}

type tallied struct {
	whole bool            // a refusal of the key was recorded whole in the window
	count int             // refusals counted after it
	last  ProposalRefused // the latest counted one
}

// Whole reports whether a refusal of k is to be recorded whole: its code is
// not tallied, or no refusal of k was recorded whole in the window yet.
// Two refusals decided at once may both be told whole; each is recorded.
func (t *RefusalTally) Whole(k RefusalKey) bool {
	if !Tallied(k.Code) {
		return true
	}
	w := t.open[k]
	return w == nil || !w.whole
}

// Add records a refusal of k: recorded whole (whole), or counted, with ev
// describing it.
func (t *RefusalTally) Add(k RefusalKey, ev ProposalRefused, whole bool) {
	if t.open == nil {
		t.open = map[RefusalKey]*tallied{}
	}
	w := t.open[k]
	if w == nil {
		w = &tallied{}
		t.open[k] = w
	}
	if whole {
		w.whole = true
		return
	}
	w.count++
	w.last = ev
}

// Close ends the window (named by window, for the reasons) and starts the
// next: it returns one aggregate per key that counted refusals, ordered by
// key, each with Count the refusals it stands for, the key's code and
// capability, and the last one's principal, body digest and reason.
func (t *RefusalTally) Close(window string) []ProposalRefused {
	var out []ProposalRefused
	for k, w := range t.open {
		if w.count == 0 {
			continue
		}
		ev := w.last
		ev.Code, ev.CapabilityID, ev.Count = k.Code, k.CapabilityID, w.count
		ev.Reason = fmt.Sprintf("%d more proposals refused %s within %s; the last: %s", w.count, k.Code, window, ev.Reason)
		out = append(out, ev)
	}
	t.open = nil
	slices.SortFunc(out, func(a, b ProposalRefused) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Code, b.Code), cmp.Compare(a.CapabilityID, b.CapabilityID))
	})
	return out
}
