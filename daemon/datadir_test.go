package daemon_test

import (
	"errors"
	"testing"

	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
)

// TestDataDirLockBoot: a second Boot on the data_dir of a running runtime
// is refused with ErrDataDirLocked before it starts a server; after Close
// the data_dir boots again.
func TestDataDirLockBoot(t *testing.T) {
	dir := t.TempDir()
	first, err := bootConfig(t, testConfig(t, dir, "http://127.0.0.1:9"), daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rt, err := bootConfig(t, testConfig(t, dir, "http://127.0.0.1:9"), daemontest.Options{}); !errors.Is(err, daemon.ErrDataDirLocked) {
		if rt != nil {
			rt.Close()
		}
		t.Fatalf("second Boot: %v", err)
	}
	first.Close()
	again, err := bootConfig(t, testConfig(t, dir, "http://127.0.0.1:9"), daemontest.Options{})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.Close()
}
