package kernel

import (
	"fmt"
	"testing"
)

// BenchmarkDecideReserve decides reservations against a resource that already
// holds 1,000 receipts.
func BenchmarkDecideReserve(b *testing.B) {
	l := ledgerWith(b, 1000)
	cmd := Reserve{GuaranteeID: "g", Resource: "r", AttemptID: "new", OperationID: "new", Amount: 1, Limit: 1 << 40, DefinitionDigest: "d"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := DecideExposure(l, cmd); d.Refusal != nil {
			b.Fatal(d.Refusal)
		}
	}
}

// BenchmarkDecideObserve decides a settlement of one of 1,000 receipts.
func BenchmarkDecideObserve(b *testing.B) {
	l := ledgerWith(b, 1000)
	cmd := Observe{AttemptID: "a500", Outcome: OutcomeApplied, Source: "provider"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := DecideExposure(l, cmd); d.Refusal != nil {
			b.Fatal(d.Refusal)
		}
	}
}

func ledgerWith(tb testing.TB, n int) *Ledger {
	var l Ledger
	for i := 0; i < n; i++ {
		a := fmt.Sprintf("a%d", i)
		for _, c := range []Command{
			Reserve{GuaranteeID: "g", Resource: "r", AttemptID: a, OperationID: a, Amount: 1, Limit: 1 << 40, DefinitionDigest: "d"},
			StartDispatch{AttemptID: a},
		} {
			for _, ev := range DecideExposure(&l, c).Events {
				if err := l.Apply(ev); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	return &l
}
