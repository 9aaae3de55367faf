package daemon

import (
	"bytes"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/contextos/ledger/config"
)

// TestSharedKeyFileConverges: replicas that start at once on one key file
// (a shared volume, no key yet) all end up with the same key.
func TestSharedKeyFileConverges(t *testing.T) {
	cfg := &config.Config{Runtime: config.RuntimeConfig{KeyFile: filepath.Join(t.TempDir(), "keys", "runtime.key")}}
	keys := make([][]byte, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			keys[i], errs[i] = createOrLoadKey(cfg.Runtime.KeyFile)
		}(i)
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("replica %d made its own key", i)
		}
	}
	matches, _ := filepath.Glob(cfg.Runtime.KeyFile + ".*")
	if len(matches) != 0 {
		t.Fatalf("left behind: %v", matches)
	}
}

// TestDataDirLockBoot: a second Boot on the data_dir of a running runtime
// is refused with ErrDataDirLocked before it starts a server; after Close
// the data_dir boots again.
func TestDataDirLockBoot(t *testing.T) {
	dir := t.TempDir()
	first, err := Boot(testConfig(t, dir, "http://127.0.0.1:9"), BootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rt, err := Boot(testConfig(t, dir, "http://127.0.0.1:9"), BootOptions{}); !errors.Is(err, ErrDataDirLocked) {
		if rt != nil {
			rt.Close()
		}
		t.Fatalf("second Boot: %v", err)
	}
	first.Close()
	again, err := Boot(testConfig(t, dir, "http://127.0.0.1:9"), BootOptions{})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.Close()
}
