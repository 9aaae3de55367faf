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
	first := startEnv(t).d
	if d, err := daemontest.Start(t, gatewayOptions(daemontest.Options{Of: first})); !errors.Is(err, daemon.ErrDataDirLocked) {
		if d.RT != nil {
			d.RT.Close()
		}
		t.Fatalf("second Boot: %v", err)
	}
	first.RT.Close()
	again, err := daemontest.Start(t, gatewayOptions(daemontest.Options{Of: first}))
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.RT.Close()
}
