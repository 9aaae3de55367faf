package packet_test

import (
	"bytes"
	"testing"

	"github.com/contextos/ledger/packet"
)

// FuzzParse: Parse never panics, and what it accepts re-encodes to a
// packet that parses to the same encoding; verifying and replaying an
// accepted packet never panics.
func FuzzParse(f *testing.F) {
	w := story(&testing.T{})
	for _, p := range w.packets {
		b, err := packet.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := packet.Parse(b)
		if err != nil {
			return
		}
		enc, err := packet.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := packet.Parse(enc)
		if err != nil {
			t.Fatalf("re-encoded packet refused: %v", err)
		}
		enc2, _ := packet.Marshal(q)
		if !bytes.Equal(enc, enc2) {
			t.Fatal("re-encoding is not stable")
		}
		if p.Verify(nil) == nil {
			_, _ = p.Replay()
		}
	})
}
