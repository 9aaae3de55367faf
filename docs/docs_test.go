package docs

import (
	"os"
	"strings"
	"testing"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

func TestErrorCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("errors.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range wire.Codes {
		if !strings.Contains(string(b), "| `"+string(c)+"` |") {
			t.Errorf("error code %s is not in docs/errors.md", c)
		}
	}
}

func TestEventsDocumented(t *testing.T) {
	b, err := os.ReadFile("events.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range kernel.EventTypes() {
		if !strings.Contains(string(b), "| `"+typ+"` |") {
			t.Errorf("event type %s is not in docs/events.md", typ)
		}
	}
}
