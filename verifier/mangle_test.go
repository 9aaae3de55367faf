package verifier

import (
	"bytes"
	"testing"
)

// TestMangleEveryRecordByte flips bits at every byte position of one record
// of a small valid export: the verifier must reject each change (or the file
// must no longer parse), never accept it.
func TestMangleEveryRecordByte(t *testing.T) {
	f := newFixture(t, 3, 2)
	good := f.entries(t)
	if res, err := VerifyEntries(good, f.keys); err != nil || !res.OK() {
		t.Fatalf("fixture export does not verify: %v %+v", err, res.Failure)
	}
	rec := f.records[1]
	start := bytes.Index(good, rec)
	if start < 0 {
		t.Fatal("record not found in export")
	}
	masks := []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80}
	if testing.Short() {
		masks = masks[:1]
	}
	b := append([]byte{}, good...)
	checked := 0
	for i := start; i < start+len(rec); i++ {
		for _, m := range masks {
			b[i] ^= m
			res, err := VerifyEntries(b, f.keys)
			if err == nil && res.OK() {
				t.Fatalf("byte %d of record 1 (%q) xor %#x accepted", i-start, good[i], m)
			}
			b[i] ^= m
			checked++
		}
	}
	t.Logf("%d single-byte changes of a %d-byte record refused", checked, len(rec))
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
	p, err := ProveEntries(Entries{Tenant: f.tenant, Records: f.records, Checkpoints: f.checkpoints}, mustEventID(t, f.records[3]))
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalProof(p)
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
