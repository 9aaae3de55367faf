package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles contextosd, with its fault hooks (-tags faults), and the
// natsd helper into dir with the go tool of this machine, from the module
// rooted at root.
func Build(ctx context.Context, root, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "faults", "-o", dir+string(os.PathSeparator), "./cmd/contextosd", "./internal/testing/chaos/cmd/natsd")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// ModuleRoot finds the directory of go.mod from the working directory up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

// Proc is a child process the harness restarts: a contextosd or a natsd.
type Proc struct {
	Name  string
	path  string
	args  []string
	env   []string
	log   string
	ready string // a line of its output that says it is ready

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exit    string // how the last run ended: "", "killed", "exit 1", ...
	paused  bool
	running bool
	starts  int
}

// Start starts the process with extra environment and waits until its
// output shows the ready line.
func (p *Proc) Start(extraEnv ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return fmt.Errorf("%s already running", p.Name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== start %d %v\n", p.starts+1, extraEnv)
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(append(os.Environ(), p.env...), extraEnv...)
	orphanProof(cmd)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			if !once && strings.Contains(line, p.ready) {
				once = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		f.Close()
	}()
	done := make(chan struct{})
	p.cmd, p.done, p.running, p.paused, p.exit = cmd, done, true, false, ""
	p.starts++
	go func() {
		err := cmd.Wait()
		pw.Close()
		p.mu.Lock()
		p.running = false
		p.exit = exitString(err)
		p.mu.Unlock()
		close(done)
	}()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready (%s); see %s", p.Name, p.Exit(), p.log)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("%s not ready in 60s; see %s", p.Name, p.log)
	}
}

func exitString(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			if ws.Signal() == syscall.SIGKILL {
				return "killed"
			}
			return ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "exit 0"
}

// Running reports whether the process runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// Exit is how the last run ended.
func (p *Proc) Exit() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Done is closed when the current run ends.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Signal sends sig to the running process (by its pid).
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return fmt.Errorf("%s not running", p.Name)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return p.cmd.Process.Signal(sig)
}

// Kill SIGKILLs the process (resuming it first if paused) and waits for it.
func (p *Proc) Kill() {
	p.mu.Lock()
	running, done := p.running, p.done
	if running {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	p.mu.Unlock()
	if running {
		<-done
	}
}

// Paused reports whether the process is stopped by SIGSTOP.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}
