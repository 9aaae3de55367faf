package verifier

import (
	"bytes"
	"testing"
)

// BenchmarkVerifyEntries verifies a 2,000-record export (two Ed25519
// verifications per record: the record's and its event's); records/s is the
// figure to watch.
func BenchmarkVerifyEntries(b *testing.B) {
	f := newFixture(b, 2000, 500)
	data := f.entries(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := VerifyEntries(data, f.keys)
		if err != nil || !res.OK() {
			b.Fatal(err, res.Failure)
		}
	}
	b.ReportMetric(float64(len(f.records))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkReplay replays 2,000 exported events with signature checks.
func BenchmarkReplay(b *testing.B) {
	f := newFixture(b, 2000, 500)
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
	f := newFixture(b, 2000, 500)
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
