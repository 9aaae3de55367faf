//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package daemon

import (
	"errors"
	"os"
	"runtime"
)

// LockFileName is the file in nats.data_dir that a running daemon holds
// an exclusive lock on.
const LockFileName = "contextosd.lock"

// ErrDataDirLocked is returned by Boot when another process holds the
// data_dir.
var ErrDataDirLocked = errors.New("nats.data_dir is in use by another contextosd")

// lockDataDir refuses to run the embedded server where no advisory file lock
// is available: an unlocked data_dir could be opened by two daemons.
func lockDataDir(string) (*os.File, error) {
	return nil, errors.New("the embedded server's data_dir lock is not supported on " + runtime.GOOS + "; use an external NATS (nats.url)")
}

// volumeFree cannot measure a volume here; the streams' and the account's
// limits still bound the store (storeSpace).
func volumeFree(string) (uint64, error) {
	return 0, errors.ErrUnsupported
}
