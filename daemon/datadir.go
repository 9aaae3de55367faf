//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFileName is the file in nats.data_dir that a running daemon holds
// an exclusive lock on.
const LockFileName = "contextosd.lock"

// ErrDataDirLocked is returned by Boot when another process holds the
// data_dir.
var ErrDataDirLocked = errors.New("nats.data_dir is in use by another contextosd")

// lockDataDir takes an exclusive, non-blocking flock on <dir>/contextosd.lock
// and writes this process's pid in it. Two embedded servers on one
// JetStream directory would each believe they own the files; the lock makes
// the second refuse to start instead. The kernel releases the lock when the
// process dies, however it dies, so a crash leaves nothing to clean up.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w (%s, held by pid %s)", ErrDataDirLocked, dir, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// volumeFree is how many bytes an unprivileged process may still write on
// the volume that holds dir.
func volumeFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
