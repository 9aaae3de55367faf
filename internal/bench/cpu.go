package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUMeter reads a cumulative CPU time; what a point consumed is the
// difference of two readings (Config.CPU).
type CPUMeter func() (time.Duration, error)

// ProcessCPU is the user and system CPU time this process has used, all
// its threads: the embedded nats-server, the runtime, the agents' clients
// and the provider when they run in it.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, which the
// kernel fixes at 100 for that file whatever its own tick rate.
const clockTick = 10 * time.Millisecond

// ProcStat is what Linux reports of one process in /proc/<pid>/stat.
type ProcStat struct {
	PID, PPID int
	// User and System are the process's own CPU time; ChildUser and
	// ChildSystem that of its children it has waited for (reaped), which
	// leave /proc when they exit.
	User, System, ChildUser, ChildSystem time.Duration
}

// CPU is the process's own user and system time.
func (s ProcStat) CPU() time.Duration { return s.User + s.System }

// ParseProcStat parses the contents of a /proc/<pid>/stat file. The
// command name (field 2) may hold spaces and parentheses, so the fields
// are counted from its last closing parenthesis.
func ParseProcStat(b []byte) (ProcStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return ProcStat{}, errors.New("proc stat: no command name")
	}
	var s ProcStat
	var err error
	if s.PID, err = strconv.Atoi(strings.TrimSpace(string(b[:open]))); err != nil {
		return ProcStat{}, fmt.Errorf("proc stat: pid: %w", err)
	}
	// Fields from 3 (state) on; utime is field 14, stime 15, cutime 16,
	// cstime 17 (proc(5)).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 {
		return ProcStat{}, fmt.Errorf("proc stat: %d fields after the command name", len(f))
	}
	field := func(n int) (int64, error) { return strconv.ParseInt(f[n-3], 10, 64) }
	ppid, err := field(4)
	if err != nil {
		return ProcStat{}, fmt.Errorf("proc stat: ppid: %w", err)
	}
	s.PPID = int(ppid)
	for n, d := range map[int]*time.Duration{14: &s.User, 15: &s.System, 16: &s.ChildUser, 17: &s.ChildSystem} {
		v, err := field(n)
		if err != nil {
			return ProcStat{}, fmt.Errorf("proc stat: field %d: %w", n, err)
		}
		*d = time.Duration(v) * clockTick
	}
	return s, nil
}

// ReadProcStat reads /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ProcStat{}, err
	}
	return ParseProcStat(b)
}

// TreeCPU is the CPU time of process pid and of its children: its own,
// that of its children still running, and that of the children it has
// reaped (so a child that exits between two readings still counts).
// Grandchildren are not looked for: a postmaster's backends and auxiliary
// processes are all its children.
func TreeCPU(pid int) (time.Duration, error) {
	root, err := ReadProcStat(pid)
	if err != nil {
		return 0, err
	}
	total := root.CPU() + root.ChildUser + root.ChildSystem
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil || child == pid {
			continue
		}
		s, err := ReadProcStat(child)
		if err != nil {
			continue // exited since the listing
		}
		if s.PPID == pid {
			total += s.CPU()
		}
	}
	return total, nil
}

// Sum is a meter reading every one of ms and adding them.
func Sum(ms ...CPUMeter) CPUMeter {
	return func() (time.Duration, error) {
		var total time.Duration
		for _, m := range ms {
			d, err := m()
			if err != nil {
				return 0, err
			}
			total += d
		}
		return total, nil
	}
}
