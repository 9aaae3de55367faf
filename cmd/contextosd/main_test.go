package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary run as contextosd itself, for the tests
// that start it as a real process.
func TestMain(m *testing.M) {
	if args := os.Getenv("CONTEXTOSD_TEST_ARGS"); args != "" {
		os.Args = append([]string{"contextosd"}, strings.Fields(args)...)
		os.Exit(run())
	}
	os.Exit(m.Run())
}

const consoleConfig = `
[nats]
data_dir = "{{DATA}}"
listen = "127.0.0.1:0"
sync = "relaxed"
[console]
listen = "{{LISTEN}}"
[[tenants]]
id = "acme"
  [[tenants.operators]]
  id = "ops_alice"
  password = "alice-secret-passphrase"
`

func startDaemon(t *testing.T, listen string) *exec.Cmd {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "contextos.toml")
	cfg := strings.NewReplacer("{{DATA}}", filepath.Join(dir, "data"), "{{LISTEN}}", listen).Replace(consoleConfig)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CONTEXTOSD_TEST_ARGS=--config "+path)
	return cmd
}

// TestConsoleStarts: a [console] listen address makes contextosd serve the
// console, and it stops with the daemon.
func TestConsoleStarts(t *testing.T) {
	cmd := startDaemon(t, "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`contextosd started.* console=(http://127\.0\.0\.1:[0-9]+)`)
		sc := bufio.NewScanner(stderr)
		url := ""
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url = m[1]
			}
			if strings.Contains(sc.Text(), "contextosd ready") { // signals are handled from here on
				found <- url
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var url string
	select {
	case url = <-found:
		if url == "" {
			t.Fatal("contextosd is ready without its console")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("contextosd did not start its console")
	}
	resp, err := http.Get(url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `action="/login"`) {
		t.Fatalf("GET /login: %d\n%s", resp.StatusCode, b)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("contextosd exit: %v", err)
	}
	if _, err := http.Get(url + "/login"); err == nil {
		t.Fatal("the console still answers after contextosd stopped")
	}
}

// TestConsoleRefusesRemote: a non-loopback console address is a
// configuration error.
func TestConsoleRefusesRemote(t *testing.T) {
	cmd := startDaemon(t, "0.0.0.0:8480")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "console.listen: loopback only") {
		t.Fatalf("%v\n%s", err, out)
	}
}
