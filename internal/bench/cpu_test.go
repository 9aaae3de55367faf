package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestParseProcStat: the fields are counted after the command name, which
// may hold spaces and parentheses; times are in clock ticks.
func TestParseProcStat(t *testing.T) {
	line := "4242 (postgres: bench (x) idle) S 17 4242 4242 0 -1 4194560 1306 0 0 0 250 75 3 4 20 0 1 0 1234 225509376 3443 18446744073709551615 1 1 0 0 0 0 4194304 19935232 84487 0 0 0 17 1 0 0 0 0 0\n"
	s, err := ParseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStat{PID: 4242, PPID: 17, User: 2500 * time.Millisecond, System: 750 * time.Millisecond, ChildUser: 30 * time.Millisecond, ChildSystem: 40 * time.Millisecond}
	if s != want {
		t.Fatalf("parsed %+v, want %+v", s, want)
	}
	if s.CPU() != 3250*time.Millisecond {
		t.Fatalf("CPU %v", s.CPU())
	}
	for _, bad := range []string{"", "4242 no name S 1", "4242 (short) S 1 2 3", "x (name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// spin burns at least d of this process's CPU.
func spin(t *testing.T, d time.Duration) {
	t.Helper()
	start, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for {
		for i := 0; i < 1_000_000; i++ {
			x += i ^ x
		}
		if now, _ := ProcessCPU(); now-start >= d {
			break
		}
	}
	if x == 42 {
		t.Log(x)
	}
}

// TestReadProcStatSelf: this process's /proc stat moves with the CPU it
// burns, as getrusage measures it.
func TestReadProcStatSelf(t *testing.T) {
	read := func() (proc, ru time.Duration) {
		s, err := ReadProcStat(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if s.PID != os.Getpid() || s.PPID != os.Getppid() {
			t.Fatalf("read pid %d ppid %d, this process is %d of %d", s.PID, s.PPID, os.Getpid(), os.Getppid())
		}
		r, err := ProcessCPU()
		if err != nil {
			t.Fatal(err)
		}
		return s.CPU(), r
	}
	p0, r0 := read()
	spin(t, 300*time.Millisecond)
	p1, r1 := read()
	dp, dr := p1-p0, r1-r0
	if dr < 300*time.Millisecond || dp < dr-60*time.Millisecond || dp > dr+60*time.Millisecond {
		t.Fatalf("/proc stat moved %v, getrusage %v", dp, dr)
	}
}

// TestTreeCPU: a process tree's CPU counts a running child's, and still
// counts it once the child has exited and been reaped.
func TestTreeCPU(t *testing.T) {
	child := exec.Command("sh", "-c", "while :; do :; done")
	if err := child.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	var childCPU time.Duration
	for deadline := time.Now().Add(30 * time.Second); childCPU < 200*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("the child used %v of CPU in 30s", childCPU)
		}
		time.Sleep(20 * time.Millisecond)
		s, err := ReadProcStat(child.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if s.PPID != os.Getpid() {
			t.Fatalf("the child's parent is %d", s.PPID)
		}
		childCPU = s.CPU()
	}
	self, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	running, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if running < self.CPU()+childCPU {
		t.Fatalf("tree %v, less than this process's %v and the child's %v", running, self.CPU(), childCPU)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // reaped: its times move to this process's children's
	reaped, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if reaped < running {
		t.Fatalf("tree %v after the child exited, %v before", reaped, running)
	}
	after, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.ChildUser+after.ChildSystem < childCPU {
		t.Fatalf("reaped children's CPU %v, the child had used %v", after.ChildUser+after.ChildSystem, childCPU)
	}
}
