package projections

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAuditSync records 2,000 events of one tenant from a real
// JetStream (in this process) into a fresh audit stream each iteration:
// the projector's cost per event, reading, sealing and appending, with the
// server's share. records/cpu-s divides by the process's CPU time.
func BenchmarkAuditSync(b *testing.B) {
	e := newEnv(b)
	d := newDriver(e, "acme", 3, []string{"ord_1", "ord_2", "ord_3"})
	d.appendN(b, 2000)
	ctx := context.Background()
	n := len(tenantEvents(b, e.store, "acme"))
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := e.js.DeleteStream(ctx, AuditStreamName); err != nil {
			b.Fatal(err)
		}
		if _, err := EnsureAuditStream(ctx, e.js, AuditStreamOptions{}); err != nil {
			b.Fatal(err)
		}
		p := e.projector(b, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 256 })
		c0 := cpuTime()
		b.StartTimer()
		if err := p.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		if st := p.Status(); st.Records != int64(n) {
			b.Fatalf("%d records for %d events", st.Records, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "records/cpu-s")
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
