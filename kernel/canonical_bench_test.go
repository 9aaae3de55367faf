package kernel

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// BenchmarkCanonical: an event body as sealing canonicalizes it, by
// Canonical (members sorted in one pass) and, as the baseline of the same
// run, by the JCS transform of the marshaled bytes.
func BenchmarkCanonical(b *testing.B) {
	ev := ExposureReserved{GuaranteeID: "refunds-per-order", Resource: "ord_881", AttemptID: "01M8VR1PDZY0VNA322FAZSZ5DW",
		OperationID: "01M8VR1PE0TZQ8THFS71MBAJ01", Amount: 80000, Limit: 100000,
		DefinitionDigest: "a67f06ba35a56ba11a6612558da1c7075ba4465d38bf0e8f4a280c87ae0ea883"}
	b.Run("canonical", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := Canonical(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jcs", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			raw, err := json.Marshal(ev)
			if err == nil {
				_, err = jcs.Transform(raw)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
