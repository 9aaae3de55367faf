package lincheck

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// Attempt is what the stream says about one attempt.
type Attempt struct {
	AttemptID    string
	OperationID  string
	Tenant       string
	Principal    string
	RunID        string
	OperationKey string
	GuaranteeID  string
	Resource     string
	Amount       int64
	Started      bool
	Closed       bool
	Outcome      kernel.Outcome      // the operation's last recorded outcome
	State        kernel.ReceiptState // the receipt's final state on its ledger (0 without a ledger)
	Asserted     bool                // released by an operator's absence assertion
}

// LedgerState is the final state of one resource ledger.
type LedgerState struct {
	Tenant  string
	Subject string
	Ledger  *kernel.Ledger
}

// Report is what Audit found in a stream.
type Report struct {
	Events            int
	Types             map[string]int
	EventIDs          map[string]struct{}
	BadSignatures     []string // event ids whose signature does not verify
	FoldErrors        []string // events the kernel refuses to fold
	CeilingViolations []string // committed + held > limit (or negative) after an event
	Ledgers           map[string]*LedgerState
	Operations        map[string]*kernel.Operation // by operation subject
	OperationIDs      map[string]string            // operation id -> subject
	Attempts          map[string]*Attempt
	Incidents         int
	// Refusals counts refusal codes in operation.refused and proposal.refused.
	Refusals map[string]int
}

// Audit replays the whole stream of store: it verifies every signature with
// keys, folds every ledger and operation with the kernel, and checks the
// ceiling after every event.
func Audit(ctx context.Context, store events.Store, keys codec.Keyring) (*Report, error) {
	r := &Report{Types: map[string]int{}, EventIDs: map[string]struct{}{}, Ledgers: map[string]*LedgerState{},
		Operations: map[string]*kernel.Operation{}, OperationIDs: map[string]string{}, Attempts: map[string]*Attempt{}, Refusals: map[string]int{}}
	err := store.Replay(ctx, 1, func(st events.Stored) error {
		r.Events++
		env := st.Envelope
		r.Types[env.Type]++
		r.EventIDs[env.EventID] = struct{}{}
		if err := keys.Verify(env); err != nil {
			r.BadSignatures = append(r.BadSignatures, fmt.Sprintf("seq %d %s: %v", st.Seq, env.EventID, err))
		}
		ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
		if err != nil {
			r.FoldErrors = append(r.FoldErrors, fmt.Sprintf("seq %d %s: %v", st.Seq, env.Type, err))
			return nil
		}
		tok := strings.Split(st.Subject, ".")
		if len(tok) < 4 {
			return nil
		}
		tenant := tok[2]
		switch tok[3] {
		case "exposure":
			ls := r.Ledgers[st.Subject]
			if ls == nil {
				ls = &LedgerState{Tenant: tenant, Subject: st.Subject, Ledger: &kernel.Ledger{}}
				r.Ledgers[st.Subject] = ls
			}
			if err := ls.Ledger.Apply(ev); err != nil {
				r.FoldErrors = append(r.FoldErrors, fmt.Sprintf("seq %d %s on %s: %v", st.Seq, env.Type, st.Subject, err))
				return nil
			}
			if id := exposureAttempt(ev); id != "" {
				// Recorded as it changes: a long-lived ledger archives old
				// sealed receipts, so its final state does not list them all.
				if rc, ok := ls.Ledger.Receipt(id); ok {
					r.attempt(id).State = rc.State
				}
			}
			b := ls.Ledger.Balance()
			// A guarantee in observe mode may go over its limit: those
			// reservations are marked over_limit and counted.
			if b.Committed < 0 || b.Held < 0 || (b.Committed+b.Held > b.Limit && ls.Ledger.OverLimit == 0) {
				r.CeilingViolations = append(r.CeilingViolations, fmt.Sprintf("seq %d %s: committed=%d held=%d limit=%d", st.Seq, ls.Ledger.Resource, b.Committed, b.Held, b.Limit))
			}
			switch e := ev.(type) {
			case kernel.ExposureReserved:
				a := r.attempt(e.AttemptID)
				a.Tenant, a.GuaranteeID, a.Resource, a.Amount, a.OperationID = tenant, e.GuaranteeID, e.Resource, e.Amount, e.OperationID
			case kernel.ExposureAbsenceAsserted:
				r.attempt(e.AttemptID).Asserted = true
			case kernel.ExposureIncident:
				r.Incidents++
			}
		case "operation":
			op := r.Operations[st.Subject]
			if op == nil {
				op = &kernel.Operation{}
				r.Operations[st.Subject] = op
			}
			if err := op.Apply(ev); err != nil {
				r.FoldErrors = append(r.FoldErrors, fmt.Sprintf("seq %d %s on %s: %v", st.Seq, env.Type, st.Subject, err))
				return nil
			}
			switch e := ev.(type) {
			case kernel.OperationOpened:
				r.OperationIDs[e.OperationID] = st.Subject
			case kernel.OperationRefused:
				r.Refusals[string(e.Code)]++
			case kernel.OperationReserved:
				a := r.attempt(e.AttemptID)
				a.OperationID, a.Principal, a.RunID, a.OperationKey = op.OperationID, op.Principal, op.RunID, op.OperationKey
			}
		case "refusal":
			if e, ok := ev.(kernel.ProposalRefused); ok {
				r.Refusals[string(e.Code)] += max(1, e.Count) // an aggregate counts as Count refusals
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	for _, op := range r.Operations {
		for _, at := range op.Attempts {
			a := r.attempt(at.AttemptID)
			a.Started, a.Closed, a.Outcome = at.Started, at.Closed, at.Outcome
		}
	}
	return r, nil
}

// exposureAttempt is the attempt an exposure event is about.
func exposureAttempt(ev kernel.Event) string {
	switch e := ev.(type) {
	case kernel.ExposureReserved:
		return e.AttemptID
	case kernel.ExposureDispatchStarted:
		return e.AttemptID
	case kernel.ExposureObserved:
		return e.AttemptID
	case kernel.ExposureClosed:
		return e.AttemptID
	case kernel.ExposureAbsenceAsserted:
		return e.AttemptID
	}
	return ""
}

func (r *Report) attempt(id string) *Attempt {
	a := r.Attempts[id]
	if a == nil {
		a = &Attempt{AttemptID: id}
		r.Attempts[id] = a
	}
	return a
}

// Open lists the attempts whose receipt still holds exposure, sorted.
func (r *Report) Open() []*Attempt {
	var out []*Attempt
	for _, a := range r.Attempts {
		if a.State.Open() {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AttemptID < out[j].AttemptID })
	return out
}

// Stranded is the exposure held by open receipts.
func (r *Report) Stranded() (attempts int, amount int64) {
	for _, a := range r.Open() {
		attempts++
		amount += a.Amount
	}
	return attempts, amount
}

// Ledger returns the final ledger of (tenant, guarantee, resource).
func (r *Report) Ledger(tenant, guaranteeID, resource string) *kernel.Ledger {
	for _, ls := range r.Ledgers {
		if ls.Tenant == tenant && ls.Ledger.GuaranteeID == guaranteeID && ls.Ledger.Resource == resource {
			return ls.Ledger
		}
	}
	return nil
}
