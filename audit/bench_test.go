package audit

import (
	"crypto/ed25519"
	"testing"

	"github.com/contextos/ledger/events/codec"
)

// BenchmarkSeal is the projector's cost per event for its record: the
// record put together around the stored event, and its leaf hash
// (records/s is the figure).
func BenchmarkSeal(b *testing.B) { benchSeal(b, false) }

// BenchmarkSealAndSign is BenchmarkSeal plus the per-record Ed25519
// signature that version 1 records carried: the cost the projector no
// longer pays on every event.
func BenchmarkSealAndSign(b *testing.B) { benchSeal(b, true) }

func benchSeal(b *testing.B, sign bool) {
	var recs []Record
	var envs []codec.Envelope
	for _, raw := range vectorRecords(b) {
		r, env, err := Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		recs, envs = append(recs, r), append(envs, env)
	}
	key := fixedKey("bench")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, env := recs[i%len(recs)], envs[i%len(recs)]
		_, raw, err := Seal(r.Tenant, r.Index, r.PrevHash, r.EventSeq, r.Subject, r.Event, env)
		if err != nil {
			b.Fatal(err)
		}
		if sign {
			_ = ed25519.Sign(key, raw)
		}
		_ = RecordHash(raw)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkParse is the strict decoding of a record and its event, the
// share of an export's verification that is not the event's signature.
func BenchmarkParse(b *testing.B) {
	recs := vectorRecords(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := Parse(recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkVerifyEvent is the check of a parsed record's event signature.
func BenchmarkVerifyEvent(b *testing.B) {
	var recs []Record
	var envs []codec.Envelope
	for _, raw := range vectorRecords(b) {
		r, env, err := Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		recs, envs = append(recs, r), append(envs, env)
	}
	ring := codec.Keyring{}
	ring.Add(fixedKey("contextos verifier vectors: runtime key").Public().(ed25519.PublicKey))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := VerifyEvent(recs[i%len(recs)], envs[i%len(recs)], ring); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
