package lincheck

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const limit = 100000

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	if in.Resource == "" {
		in.Resource = "ord_1"
	}
	in.Limit = limit
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func bal(status string, c, h int64) Output {
	return Output{Status: status, HasBalance: true, Limit: limit, Committed: c, Held: h}
}

func refusedExceeded(c, h int64) Output {
	o := bal(StatusRefused, c, h)
	o.Code = CodeExceeded
	return o
}

func check(t *testing.T, ops []porcupine.Operation) Result {
	t.Helper()
	// Unknown outputs get a return after every other operation, as
	// History.Operations does.
	var end int64
	for _, o := range ops {
		end = max(end, o.Return)
	}
	for i := range ops {
		if ops[i].Output.(Output).Unknown {
			ops[i].Return = end + 1
		}
	}
	return Check(ops, 10*time.Second, t.TempDir())
}

// TestSeedRaceLinearizable: two 80000 proposals at once, one applied, one
// refused seeing the other's hold (or its commit).
func TestSeedRaceLinearizable(t *testing.T) {
	for _, refusedSaw := range []Output{refusedExceeded(0, 80000), refusedExceeded(80000, 0)} {
		ops := []porcupine.Operation{
			op(0, 0, 10, Input{Kind: KindReserve, Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
			op(0, 0, 10, Input{Kind: KindSettle, Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
			op(1, 1, 9, Input{Kind: KindReserve, Key: "b", Amount: 80000}, refusedSaw),
			op(2, 11, 12, Input{Kind: KindRead}, bal("", 80000, 0)),
		}
		if r := check(t, ops); !r.OK {
			t.Fatalf("%+v: %s", refusedSaw, r)
		}
	}
}

// TestStaleRefusalIllegal: a refusal reporting a hold that was released
// before the refused proposal was even sent is not linearizable, and the
// checker writes a visualization.
func TestStaleRefusalIllegal(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 10, Input{Kind: KindReserve, Key: "a", Amount: 80000}, bal(StatusPending, 0, 80000)),
		op(0, 0, 10, Input{Kind: KindSettle, Key: "a", Amount: 80000}, bal(StatusPending, 0, 80000)),
		op(1, 20, 30, Input{Kind: KindReconcile, Key: "a"}, Output{Outcome: OutcomeNotApplied, Status: StatusNotApplied}),
		op(2, 40, 50, Input{Kind: KindReserve, Key: "b", Amount: 50000}, refusedExceeded(0, 80000)),
	}
	r := check(t, ops)
	if r.OK || len(r.Illegal) != 1 || len(r.Visualizations) != 1 {
		t.Fatalf("want illegal with a visualization: %s", r)
	}
	if b, err := os.ReadFile(r.Visualizations[0]); err != nil || !strings.Contains(string(b), "<html") {
		t.Fatalf("visualization: %v", err)
	}
}

// TestUnknownMayOrMayNotHappen: a proposal that timed out may have
// reserved and applied, or not; reads either way are linearizable, but a
// balance no order explains is not.
func TestUnknownMayOrMayNotHappen(t *testing.T) {
	unknown := []porcupine.Operation{
		op(0, 0, 0, Input{Kind: KindReserve, Key: "a", Amount: 30000}, Output{Unknown: true}),
		op(0, 0, 0, Input{Kind: KindSettle, Key: "a", Amount: 30000}, Output{Unknown: true}),
	}
	for _, c := range []struct {
		reads []Output
		ok    bool
	}{
		{[]Output{bal("", 0, 0)}, true},
		{[]Output{bal("", 0, 30000), bal("", 30000, 0)}, true},
		{[]Output{bal("", 30000, 0), bal("", 0, 0)}, false}, // a commit never goes back
		{[]Output{bal("", 0, 40000)}, false},
	} {
		ops := append([]porcupine.Operation(nil), unknown...)
		for i, o := range c.reads {
			ops = append(ops, op(1, int64(10+10*i), int64(15+10*i), Input{Kind: KindRead}, o))
		}
		if r := check(t, ops); r.OK != c.ok {
			t.Fatalf("reads %+v: %s, want ok=%v", c.reads, r, c.ok)
		}
	}
}

// TestHoldVisibleMidProposal: a read during an applied proposal may see
// its hold; a read after it must see the commit.
func TestHoldVisibleMidProposal(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 100, Input{Kind: KindReserve, Key: "a", Amount: 1000}, bal(StatusApplied, 1000, 0)),
		op(0, 0, 100, Input{Kind: KindSettle, Key: "a", Amount: 1000}, bal(StatusApplied, 1000, 0)),
		op(1, 10, 20, Input{Kind: KindRead}, bal("", 0, 1000)),
		op(1, 110, 120, Input{Kind: KindRead}, bal("", 1000, 0)),
	}
	if r := check(t, ops); !r.OK {
		t.Fatal(r)
	}
	ops[3] = op(1, 110, 120, Input{Kind: KindRead}, bal("", 0, 1000))
	if r := check(t, ops); r.OK {
		t.Fatal("a hold seen after the applied reply returned is not linearizable")
	}
}

// TestOverCeilingRead: BalanceViolations flags any reply over the ceiling.
func TestOverCeilingRead(t *testing.T) {
	ops := []porcupine.Operation{op(0, 0, 1, Input{Kind: KindRead}, bal("", 90000, 20000))}
	if v := BalanceViolations(ops); len(v) != 1 {
		t.Fatalf("violations %v", v)
	}
	if r := check(t, ops); r.OK {
		t.Fatal("an over-ceiling read is not linearizable either")
	}
}

// TestPartitionedByResource: operations on two resources do not constrain
// each other.
func TestPartitionedByResource(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 10, Input{Kind: KindReserve, Resource: "x", Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(0, 0, 10, Input{Kind: KindSettle, Resource: "x", Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(1, 20, 30, Input{Kind: KindReserve, Resource: "y", Key: "b", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(1, 20, 30, Input{Kind: KindSettle, Resource: "y", Key: "b", Amount: 80000}, bal(StatusApplied, 80000, 0)),
	}
	if r := check(t, ops); !r.OK || r.Partitions != 2 {
		t.Fatal(r)
	}
}

// TestDefinitionChange: a raised limit admits a reservation linearized after
// it, never one that finished before the change began; a lowered one
// refuses and moves no balance.
func TestDefinitionChange(t *testing.T) {
	raised := func(status string, c, h int64) Output {
		o := bal(status, c, h)
		o.Limit = 150000
		return o
	}
	legal := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: KindReserve, Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(0, 0, 1, Input{Kind: KindSettle, Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		{ClientId: 2, Call: 2, Return: 3, Input: Input{Kind: KindSetLimit, Resource: "ord_1", Limit: 150000}, Output: Output{OK: true}},
		op(1, 4, 5, Input{Kind: KindReserve, Key: "b", Amount: 60000}, raised(StatusApplied, 140000, 0)),
		op(1, 4, 5, Input{Kind: KindSettle, Key: "b", Amount: 60000}, raised(StatusApplied, 140000, 0)),
	}
	if r := check(t, legal); !r.OK {
		t.Fatalf("a reservation after the raise: %s", r)
	}
	early := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: KindReserve, Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(0, 0, 1, Input{Kind: KindSettle, Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(1, 2, 3, Input{Kind: KindReserve, Key: "b", Amount: 60000}, raised(StatusApplied, 140000, 0)),
		op(1, 2, 3, Input{Kind: KindSettle, Key: "b", Amount: 60000}, raised(StatusApplied, 140000, 0)),
		{ClientId: 2, Call: 4, Return: 5, Input: Input{Kind: KindSetLimit, Resource: "ord_1", Limit: 150000}, Output: Output{OK: true}},
	}
	if r := check(t, early); r.OK {
		t.Fatal("a reservation over the old limit, done before the raise began, passed")
	}
	lowered := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: KindReserve, Key: "a", Amount: 80000}, bal(StatusPending, 0, 80000)),
		{ClientId: 2, Call: 2, Return: 3, Input: Input{Kind: KindSetLimit, Resource: "ord_1", Limit: 50000}, Output: Output{OK: true}},
		op(1, 4, 5, Input{Kind: KindReserve, Key: "b", Amount: 1}, Output{Status: StatusRefused, Code: CodeExceeded, HasBalance: true, Limit: 50000, Held: 80000}),
		op(0, 6, 7, Input{Kind: KindReconcile, Key: "a"}, Output{Outcome: OutcomeApplied, Status: StatusApplied}),
		op(1, 8, 9, Input{Kind: KindRead}, Output{HasBalance: true, Limit: 50000, Committed: 80000}),
	}
	if r := check(t, lowered); !r.OK {
		t.Fatalf("a lowered limit with a hold outstanding: %s", r)
	}
}

// TestWindowsPartition: each calendar window of a resource is its own ledger,
// so its own partition with its own ceiling.
func TestWindowsPartition(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 10, Input{Kind: KindReserve, Resource: "cust_7@2026-12-01", Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(0, 0, 10, Input{Kind: KindSettle, Resource: "cust_7@2026-12-01", Key: "a", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(1, 20, 30, Input{Kind: KindReserve, Resource: "cust_7@2026-12-02", Key: "b", Amount: 80000}, bal(StatusApplied, 80000, 0)),
		op(1, 20, 30, Input{Kind: KindSettle, Resource: "cust_7@2026-12-02", Key: "b", Amount: 80000}, bal(StatusApplied, 80000, 0)),
	}
	if r := check(t, ops); !r.OK || r.Partitions != 2 {
		t.Fatal(r)
	}
	over := append(ops[:2:2], op(1, 20, 30, Input{Kind: KindReserve, Resource: "cust_7@2026-12-01", Key: "b", Amount: 80000}, bal(StatusApplied, 160000, 0)))
	if r := check(t, over); r.OK {
		t.Fatal("a second 80,000 in the same window passed")
	}
}

// TestCountedRefusalClaimsNoKey: a refusal counted in its window's
// aggregate (its reply names no operation) claims no key, so the same key
// sent again once there is room may be applied; a refusal recorded whole is
// the key's answer for good.
func TestCountedRefusalClaimsNoKey(t *testing.T) {
	for _, counted := range []bool{true, false} {
		refused := refusedExceeded(20000, 60000)
		refused.Counted = counted
		ops := []porcupine.Operation{
			op(0, 0, 10, Input{Kind: KindReserve, Key: "a", Amount: 20000}, bal(StatusApplied, 20000, 0)),
			op(0, 0, 10, Input{Kind: KindSettle, Key: "a", Amount: 20000}, bal(StatusApplied, 20000, 0)),
			op(1, 11, 12, Input{Kind: KindReserve, Key: "b", Amount: 60000}, bal(StatusPending, 20000, 60000)),
			op(1, 11, 12, Input{Kind: KindSettle, Key: "b", Amount: 60000}, bal(StatusPending, 20000, 60000)),
			op(2, 13, 14, Input{Kind: KindReserve, Key: "c", Amount: 45000}, refused),
			op(1, 15, 16, Input{Kind: KindReconcile, Key: "b"}, Output{Status: StatusNotApplied, Outcome: OutcomeNotApplied}),
			op(2, 17, 18, Input{Kind: KindReserve, Key: "c", Amount: 45000}, bal(StatusApplied, 65000, 0)),
			op(2, 17, 18, Input{Kind: KindSettle, Key: "c", Amount: 45000}, bal(StatusApplied, 65000, 0)),
		}
		if r := check(t, ops); r.OK != counted {
			t.Fatalf("counted %v: %s", counted, r)
		}
	}
}
