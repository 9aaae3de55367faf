package version

import (
	"runtime"
	"strings"
	"testing"
)

// TestString: the line names the program, a version (the stamped one when
// set) and the toolchain.
func TestString(t *testing.T) {
	if got := String("ctx"); !strings.HasPrefix(got, "ctx ") || !strings.Contains(got, runtime.Version()) {
		t.Fatalf("String = %q", got)
	}
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.8.7"
	if got := Get().Version; got != "v9.8.7" {
		t.Fatalf("stamped version: %q", got)
	}
	if got := String("contextosd"); !strings.HasPrefix(got, "contextosd v9.8.7 (") {
		t.Fatalf("String = %q", got)
	}
}
