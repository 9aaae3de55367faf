package kernel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// subjects are one tenant's subjects by key, each folded as a runtime
// folds what it appended: the store of the scenario harnesses, which run
// the steps as a runtime does (Reads, then Decide on what they name, then
// the effects' events appended in the order of the reads).
type subjects map[Key]Aggregate

// load returns the states of what reads name, making the empty ones.
func (w subjects) load(reads Reads) Loaded {
	l := Loaded{}
	for _, r := range reads {
		if w[r.Key] == nil {
			w[r.Key] = r.Key.New()
		}
		l[r.Key] = w[r.Key]
	}
	return l
}

// run runs a step as a runtime does and applies its effects, writing one
// line per subject appended to: label, then the event types.
func (w subjects) run(t *testing.T, d *datadriven.TestData, out *strings.Builder, step Step, label func(Key) string) Effects {
	t.Helper()
	reads := step.Reads()
	eff := step.Decide(w.load(reads))
	w.apply(t, d, out, reads, eff, label)
	return eff
}

// apply appends the effects' events to their subjects, in the order of the
// reads; an append to a key not read for writing fails the test.
func (w subjects) apply(t *testing.T, d *datadriven.TestData, out *strings.Builder, reads Reads, eff Effects, label func(Key) string) {
	t.Helper()
	written := map[Key]bool{}
	for _, r := range reads {
		if r.Access == Write {
			written[r.Key] = true
		}
	}
	for k, evs := range eff.Append {
		if len(evs) > 0 && !written[k] {
			d.Fatalf(t, "the step appends to %v, which it does not read for writing", k)
		}
	}
	for _, r := range reads {
		evs := eff.Append[r.Key]
		if len(evs) == 0 {
			continue
		}
		types := make([]string, len(evs))
		for i, ev := range evs {
			if err := w[r.Key].Apply(ev); err != nil {
				d.Fatalf(t, "%s: %s does not fold: %v", label(r.Key), ev.EventType(), err)
			}
			types[i] = ev.EventType()
		}
		fmt.Fprintf(out, "%s: %s\n", label(r.Key), strings.Join(types, ", "))
	}
}

// ledgerOf returns the ledger of k, empty if it was never written.
func (w subjects) ledgerOf(k LedgerKey) *Ledger {
	if l, ok := w[k.Key()].(*Ledger); ok {
		return l
	}
	return &Ledger{}
}

// opOf returns the operation of k, empty if it was never written.
func (w subjects) opOf(k Key) *Operation {
	if o, ok := w[k].(*Operation); ok {
		return o
	}
	return &Operation{}
}

// refundArgs are the arguments of a refund proposal.
func refundArgs(order string, amount int64) string {
	return fmt.Sprintf(`{"order_id":%q,"amount_minor":%d}`, order, amount)
}

// proposalBody is a proposal's body.
func proposalBody(run, key, capability, args, approval string) []byte {
	b := fmt.Sprintf(`{"run_id":%q,"operation_key":%q,"capability_id":%q,"arguments":%s`, run, key, capability, args)
	if approval != "" {
		b += fmt.Sprintf(`,"approval_id":%q`, approval)
	}
	return []byte(b + "}")
}
