package verifier

import (
	"bytes"
	"testing"

	"github.com/contextos/ledger/audit"
)

// TestMangleEveryRecordByte changes every byte of every record of a small
// valid export (each of eight bit flips): the verifier refuses each change
// and names that record's index, also when the change breaks the record's
// JSON or falls on a field no event signature covers (subject, event_seq,
// prev_hash).
func TestMangleEveryRecordByte(t *testing.T) {
	f := newFixture(t, 4, 2)
	good := f.entries(t)
	if res, err := VerifyEntries(good, f.keys); err != nil || !res.OK() {
		t.Fatalf("fixture export does not verify: %v %+v", err, res.Failure)
	}
	masks := []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80}
	if testing.Short() {
		masks = masks[:2]
	}
	b := append([]byte{}, good...)
	checked := 0
	for k, rec := range f.records {
		start := bytes.Index(good, rec)
		if start < 0 {
			t.Fatal("record not found in export")
		}
		for i := start; i < start+len(rec); i++ {
			for _, m := range masks {
				b[i] ^= m
				res, err := VerifyEntries(b, f.keys)
				switch {
				case err != nil:
					t.Fatalf("record %d byte %d (%q) xor %#x: not read as an export: %v", k, i-start, good[i], m, err)
				case res.OK():
					t.Fatalf("record %d byte %d (%q) xor %#x accepted", k, i-start, good[i], m)
				case res.Failure.Index != int64(k):
					t.Fatalf("record %d byte %d (%q) xor %#x: refused at index %d (%s: %s)", k, i-start, good[i], m,
						res.Failure.Index, res.Failure.Reason, res.Failure.Detail)
				}
				b[i] ^= m
				checked++
			}
		}
	}
	t.Logf("%d single-byte changes of %d records refused, each naming its record", checked, len(f.records))
}

// TestMangleEveryExportByte flips the low bit of every byte of the whole
// export: layout, records and checkpoints.
func TestMangleEveryExportByte(t *testing.T) {
	f := newFixture(t, 3, 2)
	b := f.entries(t)
	for i := range b {
		b[i] ^= 1
		if res, err := VerifyEntries(b, f.keys); err == nil && res.OK() {
			t.Fatalf("byte %d (%q) xor 1 accepted", i, b[i]^1)
		}
		b[i] ^= 1
	}
}

// TestMangleProof flips the low bit of every byte of a proof.
func TestMangleProof(t *testing.T) {
	f := newFixture(t, 5, 5)
	p, err := ProveEntries(audit.Entries{Tenant: f.tenant, Records: f.records, Checkpoints: f.checkpoints}, mustEventID(t, f.records[3]))
	if err != nil {
		t.Fatal(err)
	}
	b, err := audit.MarshalProof(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyProof(b, f.keys); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 1
		if _, _, err := VerifyProof(b, f.keys); err == nil {
			t.Fatalf("proof byte %d (%q) xor 1 accepted", i, b[i]^1)
		}
		b[i] ^= 1
	}
}

// TestMangleEvents flips the low bit of every byte of the events of a short
// events.jsonl: a replay that checks signatures refuses every change. (The
// seq and subject of a line are routing data outside the signed event; the
// audit records sign them, see ReplayEntries.)
func TestMangleEvents(t *testing.T) {
	f := newFixture(t, 3, 3)
	b := f.eventsJSONL(t)
	if _, err := Replay(bytes.NewReader(b), f.keys.Keyring); err != nil {
		t.Fatal(err)
	}
	for _, st := range f.stored {
		start := bytes.Index(b, st.raw)
		for i := start; i < start+len(st.raw); i++ {
			b[i] ^= 1
			if _, err := Replay(bytes.NewReader(b), f.keys.Keyring); err == nil {
				t.Fatalf("events.jsonl byte %d (%q) xor 1 accepted", i, b[i]^1)
			}
			b[i] ^= 1
		}
	}
}
