// Package story is what the demo programs share: the steps and checks they
// print, the processes they start and stop, and the main that turns a told
// story into an exit code (0 when every check held).
package story

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Story is one demo's run: its data directory, the processes it started
// and the checks that did not hold.
type Story struct {
	Name    string // how the verdict names the demo: "demo", "mcp demo", ...
	Dir     string // the temporary data directory (Main makes it)
	Keep    bool   // keep Dir at the end and say where it is
	Verbose bool   // the processes' standard error to ours; else to Dir/<program>.log
	Elapsed bool   // the verdict gives the run's duration

	procs    []*exec.Cmd
	failures int
}

// Main makes the data directory, tells the story, stops what it started
// and exits: 1 when run failed or a check did not hold, 0 otherwise.
func (s *Story) Main(run func() error) {
	start := time.Now()
	code := 0
	var err error
	if s.Dir, err = os.MkdirTemp("", "contextos-"+strings.ReplaceAll(s.Name, " ", "-")+"-"); err == nil {
		err = run()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\n%s: FAILED: %v\n", s.Name, err)
		code = 1
	}
	s.Cleanup()
	if code == 0 && s.failures > 0 {
		fmt.Fprintf(os.Stderr, "\n%s: FAILED: %d check(s) did not hold\n", s.Name, s.failures)
		code = 1
	}
	if code == 0 {
		took := ""
		if s.Elapsed {
			took = fmt.Sprintf(" (%.1fs)", time.Since(start).Seconds())
		}
		fmt.Printf("\n%s: every check held%s\n", s.Name, took)
	}
	os.Exit(code)
}

// Step prints a step's title, in bold on a terminal.
func Step(n int, title string) {
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		fmt.Printf("\n\033[1m── %d. %s\033[0m\n", n, title)
		return
	}
	fmt.Printf("\n── %d. %s\n", n, title)
}

// Check prints what was checked, marked held or not; one that did not hold
// makes the run fail at the end, after the rest of the story.
func (s *Story) Check(ok bool, format string, args ...any) {
	mark := "✓"
	if !ok {
		mark = "✗"
		s.failures++
	}
	fmt.Printf("   %s %s\n", mark, fmt.Sprintf(format, args...))
}

// Spawn starts cmd in a process group of its own, to be stopped by Cleanup.
func (s *Story) Spawn(cmd *exec.Cmd) error {
	if s.Verbose {
		cmd.Stderr = os.Stderr
	} else {
		f, err := os.Create(filepath.Join(s.Dir, filepath.Base(cmd.Path)+".log"))
		if err != nil {
			return err
		}
		defer f.Close() // the child writes to its own copy
		cmd.Stderr = f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// Cleanup stops the spawned processes, the last started first (SIGTERM,
// then SIGKILL after 5 s), and removes the data directory unless kept.
func (s *Story) Cleanup() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	s.procs = nil
	switch {
	case s.Dir == "":
	case s.Keep:
		fmt.Println("   data kept in", s.Dir)
	default:
		_ = os.RemoveAll(s.Dir)
	}
}

// StartProvider starts bin's demo-provider on a loopback port and returns
// its base URL.
func (s *Story) StartProvider(bin string) (string, error) {
	portFile := filepath.Join(s.Dir, "provider.addr")
	if err := s.Spawn(exec.Command(filepath.Join(bin, "demo-provider"), "--port-file", portFile)); err != nil {
		return "", err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(portFile); err == nil && len(b) > 0 {
			return "http://" + string(b), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the provider did not start (%s did not appear)", portFile)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr is a loopback address nothing listens on now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Ctx runs bin's ctx as the tenant's operator against natsURL and returns
// its output, with its standard error after it when it failed.
func Ctx(bin, natsURL, tenant, operator, password string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(bin, "ctx"), args...)
	cmd.Env = append(os.Environ(), "CTX_NATS="+natsURL, "CTX_TENANT="+tenant, "CTX_USER="+operator, "CTX_PASSWORD="+password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// Show runs ctx as Ctx does and prints its output indented; a failure is a
// check that did not hold.
func (s *Story) Show(bin, natsURL, tenant, operator, password string, args ...string) {
	out, err := Ctx(bin, natsURL, tenant, operator, password, args...)
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("     " + l)
	}
	if err != nil {
		s.Check(false, "ctx %s: %v", strings.Join(args, " "), err)
	}
}
