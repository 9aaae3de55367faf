package interop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/testing/testenv"
)

// toolModule is the directory of the module that pins litewitness and
// witnessctl (filippo.io/torchwood). It is a module of its own so that
// torchwood's requirements (a newer go directive, SQLite) stay out of the
// ledger's module graph; the go command fetches it through the module
// proxy like any other dependency.
func toolModule() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("interop: cannot locate the litewitness module")
	}
	return filepath.Join(filepath.Dir(file), "litewitness"), nil
}

// BuildLitewitness builds litewitness and witnessctl into a directory of
// the test's and returns it. A build that fails fails the test: the
// interop check is not optional, in CI or elsewhere.
func BuildLitewitness(t testing.TB) string {
	t.Helper()
	mod, err := toolModule()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"filippo.io/torchwood/cmd/litewitness", "filippo.io/torchwood/cmd/witnessctl")
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build litewitness (module %s): %v\n%s", mod, err, out)
	}
	return dir
}

// Litewitness is filippo.io/torchwood's litewitness, a C2SP tlog-witness
// nobody on this project wrote, run as a process on loopback with its key
// in a dedicated ssh-agent, the way its README runs it.
type Litewitness struct {
	Name string // the witness's name, in its cosignature lines
	URL  string // where it serves add-checkpoint
	VKey string // its cosignature/v1 verifier key, as litewitness prints it

	bin, db, sock, fingerprint, stderr string
	proc                               *exec.Cmd
}

// StartLitewitness starts an ssh-agent holding a fresh Ed25519 key,
// registers each log (its origin is its note verifier key's name) with
// witnessctl add-log and add-key, and starts litewitness on a free
// loopback port. Everything is stopped when the test ends.
func StartLitewitness(t testing.TB, bin, name string, logKeys ...string) *Litewitness {
	t.Helper()
	for _, tool := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("litewitness keeps its key in ssh-agent: %s not found (install openssh-client): %v", tool, err)
		}
	}
	// A short directory: a unix socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	w := &Litewitness{Name: name, bin: bin, db: filepath.Join(dir, "litewitness.db"), sock: filepath.Join(dir, "agent.sock"), stderr: filepath.Join(dir, "litewitness.log")}

	key := filepath.Join(dir, "witness_key")
	run(t, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key)
	fp := strings.Fields(run(t, nil, "ssh-keygen", "-l", "-E", "sha256", "-f", key+".pub"))
	if len(fp) < 2 || !strings.HasPrefix(fp[1], "SHA256:") {
		t.Fatalf("ssh-keygen -l said %q", fp)
	}
	w.fingerprint = fp[1]
	agent := exec.Command("ssh-agent", "-D", "-a", w.sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	testenv.Eventually(t, func() bool { _, err := os.Stat(w.sock); return err == nil }, 10*time.Second, "ssh-agent's socket")
	run(t, []string{"SSH_AUTH_SOCK=" + w.sock}, "ssh-add", "-q", key)

	for _, k := range logKeys {
		origin, _, _ := strings.Cut(k, "+")
		run(t, nil, filepath.Join(bin, "witnessctl"), "add-log", "-db", w.db, "-origin", origin)
		run(t, nil, filepath.Join(bin, "witnessctl"), "add-key", "-db", w.db, "-origin", origin, "-key", k)
	}
	w.Start(t)
	return w
}

// Start starts litewitness over its database (again, after Stop) on a
// free loopback port, and waits until it serves and has printed its
// verifier key.
func (w *Litewitness) Start(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	logf, err := os.Create(w.stderr)
	if err != nil {
		t.Fatal(err)
	}
	w.proc = exec.Command(filepath.Join(w.bin, "litewitness"), "-db", w.db, "-name", w.Name,
		"-ssh-agent", w.sock, "-key", w.fingerprint, "-listen", addr)
	w.proc.Stdout, w.proc.Stderr = logf, logf
	if err := w.proc.Start(); err != nil {
		t.Fatal(err)
	}
	proc := w.proc
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait(); _ = logf.Close() })
	testenv.Eventually(t, func() bool {
		if proc.ProcessState != nil {
			return false
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return w.vkey() != ""
	}, 20*time.Second, "litewitness listening on ", addr, " (its log: ", w.stderr, ")")
	w.URL, w.VKey = "http://"+addr, w.vkey()
}

// vkey reads litewitness's verifier key from its log line
// `msg="verifier key" vkey=<key>`.
func (w *Litewitness) vkey() string {
	f, err := os.Open(w.stderr)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if !strings.Contains(s.Text(), `msg="verifier key"`) {
			continue
		}
		_, v, ok := strings.Cut(s.Text(), " vkey=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		return strings.TrimSpace(v)
	}
	return ""
}

// Stop interrupts litewitness the way its operator does (it shuts down on
// SIGINT) and waits for it.
func (w *Litewitness) Stop(t testing.TB) {
	t.Helper()
	_ = w.proc.Process.Signal(syscall.SIGINT)
	_ = w.proc.Wait()
}

// LogState is one log as witnessctl list-logs prints it: the tree
// litewitness last cosigned.
type LogState struct {
	Origin   string   `json:"origin"`
	Size     int64    `json:"size"`
	RootHash string   `json:"root_hash"`
	Keys     []string `json:"keys"`
}

// Logs runs witnessctl list-logs.
func (w *Litewitness) Logs(t testing.TB) map[string]LogState {
	t.Helper()
	out := run(t, nil, filepath.Join(w.bin, "witnessctl"), "list-logs", "-db", w.db)
	logs := map[string]LogState{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var l LogState
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("witnessctl list-logs: %q: %v", line, err)
		}
		logs[l.Origin] = l
	}
	return logs
}

// run runs a command to completion and returns its standard output.
func run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
