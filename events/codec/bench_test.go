package codec_test

import (
	"testing"

	"github.com/contextos/ledger/events/codec"
)

// BenchmarkCodec: the client-side cost every stored event pays once on write
// (Encode) and once per read (Decode), and sealing (Ed25519 signature).
func BenchmarkCodec(b *testing.B) {
	e := goldenEnvelope(b)
	raw, err := codec.Encode(e)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := codec.Encode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := codec.Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	s := goldenSigner(b)
	b.Run("seal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.Seal(e.Type, e.V, e.EventID, e.Tenant, e.Time, e.Body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
