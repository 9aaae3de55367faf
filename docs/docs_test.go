package docs

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestMetricsDocumented: the metrics the docs name are the ones the daemon
// serves (all declared in package gateway), and docs/operations.md lists
// every one of them.
func TestMetricsDocumented(t *testing.T) {
	metric := regexp.MustCompile(`contextos_[a-z0-9_]*[a-z0-9]`)
	served := map[string]bool{}
	files, err := filepath.Glob("../gateway/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"(contextos_[a-z0-9_]+)"`).FindAllSubmatch(b, -1) {
			served[string(m[1])] = true
		}
	}
	if len(served) < 20 {
		t.Fatalf("found %d metrics in package gateway: the test no longer finds them", len(served))
	}
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(docs, "../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range metric.FindAllString(string(b), -1) {
			if strings.HasPrefix(name, "contextos_ledger") { // the Python package
				continue
			}
			if !served[name] {
				t.Errorf("%s names %s, which the daemon does not serve", f, name)
			}
		}
	}
	ops, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range served {
		short := name[strings.LastIndex(name, "_"):] // `_committed` beside its family's first name
		if !strings.Contains(string(ops), "`"+name+"`") && !strings.Contains(string(ops), "`"+short+"`") {
			t.Errorf("metric %s is not in docs/operations.md", name)
		}
	}
}
