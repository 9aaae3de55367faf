package wire_test

import (
	"reflect"
	"testing"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestMirrors: the rows that show a kernel state or event have its fields,
// with the same JSON names, so that converting one into the other (which the
// compiler allows only while the fields and their types agree) keeps the
// bytes a client reads.
func TestMirrors(t *testing.T) {
	for _, p := range [][2]any{
		{wire.Balance{}, kernel.Balance{}},
		{wire.ArchivedReceipts{}, kernel.ArchivedReceipts{}},
		{wire.Run{}, kernel.Run{}},
		{wire.BreakerTrip{}, kernel.BreakerTripped{}},
		{wire.IntegrityFailure{}, kernel.IntegrityFailed{}},
	} {
		w, k := reflect.TypeOf(p[0]), reflect.TypeOf(p[1])
		if !w.ConvertibleTo(k) {
			t.Errorf("%v does not convert to %v", w, k)
			continue
		}
		for i := range w.NumField() {
			if a, b := w.Field(i).Tag.Get("json"), k.Field(i).Tag.Get("json"); a != b {
				t.Errorf("%v.%s is %q in JSON, %v's is %q", w, w.Field(i).Name, a, k, b)
			}
		}
	}
	outcomes := []wire.Outcome{wire.OutcomeApplied, wire.OutcomeNotApplied, wire.OutcomePending, wire.OutcomeUnknown, wire.OutcomePartial}
	for _, o := range outcomes {
		if !kernel.Outcome(o).Valid() {
			t.Errorf("outcome %q is not one of the kernel's", o)
		}
	}
	for _, o := range []kernel.Outcome{kernel.OutcomeApplied, kernel.OutcomeNotApplied, kernel.OutcomePending, kernel.OutcomeUnknown, kernel.OutcomePartial} {
		found := false
		for _, w := range outcomes {
			found = found || string(w) == string(o)
		}
		if !found {
			t.Errorf("kernel outcome %q has no wire.Outcome", o)
		}
	}
}
