package gateway

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"
)

// TestSharedKeyFileConverges: replicas that start at once on one key file
// (a shared volume, no key yet) all end up with the same key.
func TestSharedKeyFileConverges(t *testing.T) {
	cfg := &Config{Runtime: RuntimeConfig{KeyFile: filepath.Join(t.TempDir(), "keys", "runtime.key")}}
	keys := make([][]byte, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			keys[i], errs[i] = loadOrCreateKey(cfg)
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
