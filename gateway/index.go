package gateway

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// index folds the whole event stream into what operators and the
// reconciler look at: every resource ledger and every operation. It catches
// up from the store on demand, so every replica sees what every other one
// appended. Balances come only from kernel.Ledger.
type index struct {
	mu       sync.Mutex
	seq      uint64
	ledgers  map[string]*ledgerEntry
	ops      map[string]*opEntry
	attempts map[string]string // attempt id -> operation subject
	control  map[string]*kernel.Control
	skipped  []uint64 // sequences of stored messages that are not valid events
}

type ledgerEntry struct {
	tenant  string
	subject string
	l       kernel.Ledger
	reasons map[string]string // attempt id -> the last observation's ref (at most kernel.MaxReceipts)
}

type opEntry struct {
	tenant     string
	subject    string
	op         kernel.Operation
	startedAt  map[string]time.Time // attempt -> time of its dispatch-start
	reservedAt map[string]time.Time
}

func newIndex() *index {
	return &index{ledgers: map[string]*ledgerEntry{}, ops: map[string]*opEntry{}, attempts: map[string]string{}, control: map[string]*kernel.Control{}}
}

// catchUp folds every event appended since the last call.
func (x *index) catchUp(ctx context.Context, store events.Store) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	// A stored message that is not a valid event is skipped and counted
	// rather than blinding every operator verb and the reconciler for
	// good; the audit verifier reports it.
	return events.ReplayValid(ctx, store, func() uint64 { return x.seq }, x.apply, func(c *events.CorruptError) {
		x.skipped = append(x.skipped, c.Seq)
		x.seq = c.Seq
	})
}

// apply folds one stored event into the index.
func (x *index) apply(st events.Stored) error {
	x.seq = st.Seq
	tok := strings.Split(st.Subject, ".")
	if len(tok) < 4 {
		return nil
	}
	ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
	if err != nil {
		return nil // not a kernel event (another writer's); the verifier reports it
	}
	at, _ := time.Parse(events.TimeLayout, st.Envelope.Time)
	tenant := tok[2]
	switch tok[3] {
	case "exposure":
		e := x.ledgers[st.Subject]
		if e == nil {
			e = &ledgerEntry{tenant: tenant, subject: st.Subject}
			x.ledgers[st.Subject] = e
		}
		if e.l.Apply(ev) == nil {
			if o, ok := ev.(kernel.ExposureObserved); ok {
				if e.reasons == nil {
					e.reasons = map[string]string{}
				}
				e.reasons[o.AttemptID] = o.Ref
			}
		}
	case "operation":
		e := x.ops[st.Subject]
		if e == nil {
			e = &opEntry{tenant: tenant, subject: st.Subject, startedAt: map[string]time.Time{}, reservedAt: map[string]time.Time{}}
			x.ops[st.Subject] = e
		}
		if e.op.Apply(ev) != nil {
			return nil
		}
		switch o := ev.(type) {
		case kernel.OperationReserved:
			x.attempts[o.AttemptID] = st.Subject
			e.reservedAt[o.AttemptID] = at
		case kernel.OperationDispatchStarted:
			e.startedAt[o.AttemptID] = at
		}
	case "control":
		c := x.control[tenant]
		if c == nil {
			c = &kernel.Control{}
			x.control[tenant] = c
		}
		_ = c.Apply(ev)
	}
	return nil
}

// ExposureRow is one resource's balances in the operator view.
type ExposureRow struct {
	Tenant       string `json:"tenant"`
	GuaranteeID  string `json:"guarantee_id"`
	Resource     string `json:"resource"`
	OpenAttempts int    `json:"open_attempts"`
	kernel.Balance
}

// AttemptRow is an open attempt with its next safe step. It carries no tool
// arguments.
type AttemptRow struct {
	AttemptID   string         `json:"attempt_id"`
	OperationID string         `json:"operation_id"`
	Principal   string         `json:"principal"`
	RunID       string         `json:"run_id"`
	GuaranteeID string         `json:"guarantee_id"`
	Resource    string         `json:"resource"`
	Amount      int64          `json:"amount"`
	State       string         `json:"state"`
	Last        kernel.Outcome `json:"last_observation,omitempty"`
	// LastReason is what the last observation recorded: the provider's
	// state, or why it could not answer ("provider unreachable: ...").
	LastReason string `json:"last_reason,omitempty"`
	NextStep   string `json:"next_safe_step"`
}

func (x *index) exposure(tenant, guaranteeID, resource string) []ExposureRow {
	x.mu.Lock()
	defer x.mu.Unlock()
	var rows []ExposureRow
	for _, e := range x.ledgers {
		if e.tenant != tenant || e.l.Limit == 0 || (guaranteeID != "" && e.l.GuaranteeID != guaranteeID) || (resource != "" && e.l.Resource != resource) {
			continue
		}
		open := 0
		for _, r := range e.l.Receipts {
			if r.State.Open() {
				open++
			}
		}
		rows = append(rows, ExposureRow{Tenant: tenant, GuaranteeID: e.l.GuaranteeID, Resource: e.l.Resource, OpenAttempts: open, Balance: e.l.Balance()})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].GuaranteeID != rows[j].GuaranteeID {
			return rows[i].GuaranteeID < rows[j].GuaranteeID
		}
		return rows[i].Resource < rows[j].Resource
	})
	return rows
}

func (x *index) openAttempts(tenant string) []AttemptRow {
	x.mu.Lock()
	defer x.mu.Unlock()
	var rows []AttemptRow
	for _, e := range x.ledgers {
		if e.tenant != tenant {
			continue
		}
		for _, r := range e.l.Receipts {
			if !r.State.Open() {
				continue
			}
			row := AttemptRow{AttemptID: r.AttemptID, OperationID: r.OperationID, GuaranteeID: e.l.GuaranteeID, Resource: e.l.Resource,
				Amount: r.Amount, State: r.State.String(), Last: r.Last, LastReason: e.reasons[r.AttemptID], NextStep: r.State.NextSafeStep()}
			if oe := x.ops[x.attempts[r.AttemptID]]; oe != nil {
				row.Principal, row.RunID = oe.op.Principal, oe.op.RunID
			}
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].AttemptID < rows[j].AttemptID })
	return rows
}

// operationOf returns a copy of the operation that made an attempt.
func (x *index) operationOf(attemptID string) (opEntry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.ops[x.attempts[attemptID]]
	if e == nil {
		return opEntry{}, false
	}
	c := *e
	c.op.Attempts = append([]kernel.OpAttempt(nil), e.op.Attempts...)
	return c, true
}

// unresolved lists the operations whose current attempt is neither sealed
// nor closed.
func (x *index) unresolved() []opEntry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []opEntry
	for _, e := range x.ops {
		if _, ok := e.op.Current(); ok && !e.op.Resolved() {
			c := *e
			c.op.Attempts = append([]kernel.OpAttempt(nil), e.op.Attempts...)
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].subject < out[j].subject })
	return out
}

func (x *index) killEngaged(tenant string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.control[tenant]
	return c != nil && c.Engaged
}
