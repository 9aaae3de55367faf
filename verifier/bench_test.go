package verifier

import (
	"bytes"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkVerifyEntries verifies a 10,000-record export as `ctx
// audit-verify` does (VerifyEntries): per record the strict decoding of the
// record and its event, the event's Ed25519 signature and the chain; then
// the Merkle tree and the checkpoints (one every 256 records, the
// projector's default, each cosigned by a witness). The records are the
// projector's (audit.Seal) over events the kernel decided and the runtime
// signed. records/s is wall-clock; records/cpu-s divides by the process's
// CPU time instead, the figure per core on a shared machine (run it with
// -cpu 1: one goroutine verifies).
func BenchmarkVerifyEntries(b *testing.B) {
	f := benchFixture(b)
	data := f.entries(b)
	b.SetBytes(int64(len(data)))
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := VerifyEntries(data, f.keys)
		if err != nil || !res.OK() {
			b.Fatal(err, res.Failure)
		}
	}
	b.StopTimer()
	n := float64(len(f.records)) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(n/(cpuTime()-cpu0).Seconds(), "records/cpu-s")
}

// benchExport is the export BenchmarkVerifyEntries verifies, built once:
// the benchmark function runs once per round.
var benchExport struct {
	sync.Once
	f *fixture
}

func benchFixture(tb testing.TB) *fixture {
	// Each event signed alone, a signature check per record: the
	// verifier's most expensive export (a decision's events sealed together
	// are checked under one).
	benchExport.Do(func() { benchExport.f = newFixture(tb, 10000, 256, 1) })
	return benchExport.f
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplay replays 2,000 exported events with signature checks.
func BenchmarkReplay(b *testing.B) {
	f := newFixture(b, 2000, 500, 1) // each event signed alone, as benchFixture
	data := f.eventsJSONL(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Replay(bytes.NewReader(data), f.keys.Keyring); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(f.stored))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReplayNoSignatures replays 2,000 exported events without
// signature checks: the cost of strict decoding and the kernel fold alone.
func BenchmarkReplayNoSignatures(b *testing.B) {
	f := newFixture(b, 2000, 500, 1) // each event signed alone, as benchFixture
	data := f.eventsJSONL(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Replay(bytes.NewReader(data), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(f.stored))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
