package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
)

// auditStory is step 4: the auditor's promise, with only exported files and
// the runtime's public keys.
func (d *demo) auditStory(applied string) error {
	step(4, "Audit: export, verify offline, flip one byte, prove one receipt")
	dir := filepath.Join(d.dir, "audit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, keys := filepath.Join(dir, "entries.json"), filepath.Join(dir, "keys.json")

	// The projector signs records as events arrive; wait until the export
	// holds the whole story (the settlement of the INR 150 refund is last).
	var parsed verifier.Entries
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := d.ctxOut("audit", "export", "--out", entries, "--keys-out", keys); err == nil {
			if b, err := os.ReadFile(entries); err == nil {
				parsed, _ = verifier.ParseEntries(b)
			}
		}
		if hasSettlement(parsed) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("   $ ctx audit export --out entries.json   (%d records)\n", len(parsed.Records))
	fmt.Println("   $ ctx audit-verify --entries entries.json --keys keys.json")
	out, err := d.ctxOut("audit-verify", "--entries", entries, "--keys", keys)
	indent(out)
	d.check(err == nil && hasSettlement(parsed), "the exported audit verifies offline (%d records, signed and hash-chained)", len(parsed.Records))

	// Flip one byte inside a record: an amount digit of the applied refund.
	raw, err := os.ReadFile(entries)
	if err != nil {
		return err
	}
	at := bytes.Index(raw, []byte(`\"amount\":80000`))
	if at < 0 {
		at = bytes.Index(raw, []byte(`"amount":80000`))
	}
	tampered := filepath.Join(dir, "entries-tampered.json")
	if at >= 0 {
		b := bytes.Clone(raw)
		i := at + bytes.IndexByte(raw[at:], '8')
		b[i] = '9'
		if err := os.WriteFile(tampered, b, 0o644); err != nil {
			return err
		}
	}
	fmt.Println("   (one byte changed: a reservation of 80000 now says 90000)")
	fmt.Println("   $ ctx audit-verify --entries entries-tampered.json --keys keys.json")
	out, err = d.ctxOut("audit-verify", "--entries", tampered, "--keys", keys)
	indent(out)
	d.check(at >= 0 && err != nil && bytes.Contains(out, []byte("index")), "the verifier refuses the tampered copy and names the broken record")

	// Prove the applied refund's reservation by inclusion in a signed
	// checkpoint, verified without the rest of the log.
	id := reservationOf(parsed, applied)
	proof := filepath.Join(dir, "proof.json")
	deadline = time.Now().Add(20 * time.Second)
	for {
		if _, err = d.ctxOut("audit", "prove", "--event", id, "--out", proof); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // the checkpoint covering it is published every few seconds
	}
	fmt.Printf("   $ ctx audit prove --event %s --out proof.json\n", id)
	fmt.Println("   $ ctx audit verify-proof proof.json --keys keys.json")
	out, err2 := d.ctxOut("audit", "verify-proof", proof, "--keys", keys)
	indent(out)
	d.check(id != "" && err == nil && err2 == nil, "the receipt of the applied refund is proven included in a signed checkpoint")
	return nil
}

func indent(out []byte) {
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" {
			fmt.Println("     " + l)
		}
	}
}

// recordEvent decodes the event of one exported record.
func recordEvent(rec []byte) (events.Envelope, kernel.Event, bool) {
	var r struct {
		Event json.RawMessage `json:"event"`
	}
	if json.Unmarshal(rec, &r) != nil {
		return events.Envelope{}, nil, false
	}
	env, err := events.Decode(r.Event)
	if err != nil {
		return events.Envelope{}, nil, false
	}
	ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
	return env, ev, err == nil
}

func hasSettlement(e verifier.Entries) bool {
	for _, rec := range e.Records {
		if _, ev, ok := recordEvent(rec); ok {
			if o, ok := ev.(kernel.ExposureObserved); ok && o.Source != "provider" && o.Outcome == kernel.OutcomeApplied {
				return true
			}
		}
	}
	return false
}

// reservationOf returns the event id of the exposure.reserved event of an
// attempt.
func reservationOf(e verifier.Entries, attemptID string) string {
	for _, rec := range e.Records {
		if env, ev, ok := recordEvent(rec); ok {
			if r, ok := ev.(kernel.ExposureReserved); ok && r.AttemptID == attemptID {
				return env.EventID
			}
		}
	}
	return ""
}
