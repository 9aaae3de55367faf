package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// daemonCmd runs this test binary as contextosd with args (TestMain in
// main_test.go turns CONTEXTOSD_TEST_ARGS into the command line).
func daemonCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the daemon as a process")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CONTEXTOSD_TEST_ARGS="+strings.Join(args, " "))
	return cmd
}

func writeConfig(t *testing.T, dataDir, listen, extra string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "contextos.toml")
	s := fmt.Sprintf("[nats]\ndata_dir = %q\nlisten = %q\n\n[runtime]\n%s\n[[tenants]]\nid = \"acme\"\n  [[tenants.agents]]\n  id = \"a\"\n  password = \"p-secret-passphrase\"\n", dataDir, listen, extra)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a bytes.Buffer a process writes to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the daemon and waits until it says ready.
func start(t *testing.T, config string) *exec.Cmd {
	t.Helper()
	var stderr syncBuffer
	cmd := daemonCmd(t, "--config", config)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "contextosd ready") {
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}

// runOnce runs the daemon to its exit and returns the exit code, stderr and
// how long it took.
func runOnce(t *testing.T, args ...string) (int, string, time.Duration) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := daemonCmd(t, args...)
	cmd.Stderr = &stderr
	begin := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("contextosd %s did not exit:\n%s", strings.Join(args, " "), stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), time.Since(begin)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDataDirLocked: a second daemon on the data_dir of a running one
// refuses to start, at once and saying why, and the first keeps serving;
// once the first is gone the data_dir can be used again.
func TestDataDirLocked(t *testing.T) {
	data := t.TempDir()
	first := start(t, writeConfig(t, data, freeAddr(t), ""))
	code, stderr, took := runOnce(t, "--config", writeConfig(t, data, freeAddr(t), ""))
	if code != 1 || !strings.Contains(stderr, "nats.data_dir is in use by another contextosd") ||
		!strings.Contains(stderr, fmt.Sprintf("held by pid %d", first.Process.Pid)) {
		t.Fatalf("second daemon: exit %d after %s:\n%s", code, took, stderr)
	}
	if took > 5*time.Second {
		t.Fatalf("the refusal took %s", took)
	}
	if first.ProcessState != nil {
		t.Fatal("the first daemon exited")
	}
	_ = first.Process.Kill()
	_ = first.Wait()
	start(t, writeConfig(t, data, freeAddr(t), ""))
}

// TestListenAddressTaken: a daemon whose embedded server's address, or
// metrics address, is taken fails at once naming the address.
func TestListenAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	for _, c := range []struct{ listen, extra, want string }{
		{taken, "", "nats.listen: listen tcp " + taken},
		{freeAddr(t), fmt.Sprintf("metrics_listen = %q\n", taken), "runtime.metrics_listen: listen tcp " + taken},
	} {
		code, stderr, took := runOnce(t, "--config", writeConfig(t, t.TempDir(), c.listen, c.extra))
		if code != 1 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "address already in use") || took > 5*time.Second {
			t.Fatalf("exit %d after %s, want %q:\n%s", code, took, c.want, stderr)
		}
	}
}

// TestCheckConfigAgreesWithBoot: a hostile value is refused by
// --check-config and by --config with the same message, and neither
// panics.
func TestCheckConfigAgreesWithBoot(t *testing.T) {
	cfg := writeConfig(t, t.TempDir(), freeAddr(t), "workers = -1\n")
	want := "runtime.workers must be 1..65536, not -1"
	for _, flag := range []string{"--check-config", "--config"} {
		code, stderr, _ := runOnce(t, flag, cfg)
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "panic") {
			t.Fatalf("%s: exit %d:\n%s", flag, code, stderr)
		}
	}
	code, _, _ := runOnce(t, "--check-config", writeConfig(t, t.TempDir(), freeAddr(t), ""))
	if code != 0 {
		t.Fatalf("a valid configuration: exit %d", code)
	}
}

// TestVersion: --version prints the program, a version and the toolchain,
// and a version stamped at link time (what make release does) wins.
func TestVersion(t *testing.T) {
	out, err := daemonCmd(t, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "contextosd devel (") {
		t.Fatalf("--version: %q %v", out, err)
	}
	stamped := filepath.Join(t.TempDir(), "contextosd")
	if b, err := exec.Command("go", "build", "-ldflags", "-X github.com/contextos/ledger/internal/version.Version=v1.2.3", "-o", stamped, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if out, err := exec.Command(stamped, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "contextosd v1.2.3 (") {
		t.Fatalf("stamped --version: %q %v", out, err)
	}
}

// TestInitKey: --init-key makes a 0600 key file and prints its key id, and
// refuses to replace it.
func TestInitKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "runtime.key")
	out, err := daemonCmd(t, "--init-key", path).Output()
	if err != nil || !strings.HasPrefix(string(out), "ed25519:") {
		t.Fatalf("--init-key: %q %v", out, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	before, _ := os.ReadFile(path)
	code, stderr, _ := runOnce(t, "--init-key", path)
	after, _ := os.ReadFile(path)
	if code != 1 || !strings.Contains(stderr, "file exists") || !bytes.Equal(before, after) {
		t.Fatalf("second --init-key: exit %d %s", code, stderr)
	}
}
