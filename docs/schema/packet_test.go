package schema

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDecisionPacketSchemaHoldsThePackets: every golden replay packet
// (package packet's story, one per decision kind) fits decision-packet.json.
func TestDecisionPacketSchemaHoldsThePackets(t *testing.T) {
	s := schemas(t)
	files, _ := filepath.Glob("../../packet/testdata/*.packet.json")
	if len(files) == 0 {
		t.Fatal("no golden packets")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(s["decision-packet"], b); err != nil {
			t.Errorf("%s does not fit decision-packet.json: %v", f, err)
		}
	}
}
