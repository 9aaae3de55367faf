package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/examples/internal/story"
	"github.com/contextos/ledger/kernel"
)

// auditStory is step 4: the auditor's promise, with only exported files and
// the runtime's public keys.
func (d *demo) auditStory(applied, refusedAgent, refusedAttempt string) error {
	story.Step(5, "Audit: export, verify offline with a witness policy, flip one byte, prove one receipt and one settlement")
	dir := filepath.Join(d.Dir, "audit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, keys := filepath.Join(dir, "entries.json"), filepath.Join(dir, "keys.json")

	// The projector records events as they arrive and checkpoints them
	// every few seconds; the witness cosigns each checkpoint. Wait until an
	// export holds the whole story (the settlement of the INR 150 refund is
	// last) under a checkpoint the witness cosigned.
	var parsed audit.Entries
	policy := []string{"--witness-key", demoWitness.key, "--witnesses", "1"}
	var out []byte
	var err error
	deadline := time.Now().Add(40 * time.Second)
	for {
		if _, err := d.ctxOut("audit", "export", "--out", entries, "--keys-out", keys); err == nil {
			if b, err := os.ReadFile(entries); err == nil {
				parsed, _ = audit.ParseEntries(b)
			}
		}
		if hasSettlement(parsed) {
			out, err = d.ctxOut(append([]string{"audit-verify", "--entries", entries, "--keys", keys}, policy...)...)
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // a checkpoint is published every few seconds
	}
	fmt.Printf("   $ ctx audit export --out entries.json   (%d records, all under a signed checkpoint)\n", len(parsed.Records))
	fmt.Printf("   $ ctx audit-verify --entries entries.json --keys keys.json --witness-key %s --witnesses 1\n", shorten(demoWitness.key))
	indent(out)
	d.Check(err == nil && hasSettlement(parsed), "the exported audit verifies offline (%d records, hash-chained, every one under a signed checkpoint)", len(parsed.Records))
	d.Check(err == nil && bytes.Contains(out, []byte("cosigned by the witnesses ["+demoWitnessName+"]")), "the witness %s cosigned the newest checkpoint (it cosigns only a log that extends what it saw before)", demoWitnessName)

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
	d.Check(at >= 0 && err != nil && bytes.Contains(out, []byte("index")), "the verifier refuses the tampered copy and names the broken record")

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
	d.Check(id != "" && err == nil && err2 == nil, "the receipt of the applied refund is proven included in a signed checkpoint")

	// The refused agent's auditor gets one file for its settlement: the
	// attempt's records, their inclusion proofs, the checkpoint the witness
	// cosigned and the keys, checked offline under a witness policy.
	bundle := filepath.Join(dir, "bundle.json")
	deadline = time.Now().Add(20 * time.Second)
	for {
		if _, err = d.ctxOut("audit", "prove", "--attempt", refusedAttempt, "--out", bundle); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // the checkpoint covering it is published every few seconds
	}
	fmt.Printf("   $ ctx audit prove --attempt %s --out bundle.json   (for %s's auditor: one file)\n", refusedAttempt, refusedAgent)
	fmt.Printf("   $ ctx audit-verify --bundle bundle.json --witness-key %s --witnesses 1\n", shorten(demoWitness.key))
	out, err2 = d.ctxOut(append([]string{"audit-verify", "--bundle", bundle}, policy...)...)
	indent(out)
	d.Check(refusedAttempt != "" && err == nil && err2 == nil && bytes.Contains(out, []byte("exposure.observed")) &&
		bytes.Contains(out, []byte("cosigned by the witnesses ["+demoWitnessName+"]")),
		"%s's settlement is proven in one file, offline, under a checkpoint the witness cosigned", refusedAgent)
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
func recordEvent(rec []byte) (codec.Envelope, kernel.Event, bool) {
	var r struct {
		Event json.RawMessage `json:"event"`
	}
	if json.Unmarshal(rec, &r) != nil {
		return codec.Envelope{}, nil, false
	}
	env, err := codec.Decode(r.Event)
	if err != nil {
		return codec.Envelope{}, nil, false
	}
	ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
	return env, ev, err == nil
}

func hasSettlement(e audit.Entries) bool {
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
func reservationOf(e audit.Entries, attemptID string) string {
	for _, rec := range e.Records {
		if env, ev, ok := recordEvent(rec); ok {
			if r, ok := ev.(kernel.ExposureReserved); ok && r.AttemptID == attemptID {
				return env.EventID
			}
		}
	}
	return ""
}

// demoWitnessName is the witness of the story: a C2SP tlog-witness run with
// "ctx witness serve", which the daemon asks to cosign every checkpoint.
const demoWitnessName = "witness.demo/w1"

// demoWitness is where the witness listens and its cosignature key.
var demoWitness struct{ key, addr, keyFile string }

// prepareWitness makes the witness's key and picks its address, before the
// daemon starts (its configuration names them).
func (d *demo) prepareWitness() error {
	demoWitness.keyFile = filepath.Join(d.Dir, "witness.key")
	out, err := exec.Command(filepath.Join(*bin, "ctx"), "witness", "init", "--key", demoWitness.keyFile, "--name", demoWitnessName).Output()
	if err != nil {
		return fmt.Errorf("ctx witness init: %w", err)
	}
	demoWitness.key = strings.TrimSpace(string(out))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	demoWitness.addr = ln.Addr().String()
	return ln.Close()
}

// witnessConfig is the daemon's [[runtime.witnesses]] entry.
func witnessConfig() string {
	if demoWitness.key == "" {
		return ""
	}
	return fmt.Sprintf("\n[[runtime.witnesses]]\nurl = %q\nkey = %q\n", "http://"+demoWitness.addr, demoWitness.key)
}

// startWitness starts the witness for the daemon's log, whose key it reads
// from the keys the daemon publishes (an operator would take them from
// "ctx audit keys --from-key" out of band).
func (d *demo) startWitness() error {
	logKeys := filepath.Join(d.Dir, "log-keys.json")
	if _, err := d.ctxOut("audit", "export", "--out", filepath.Join(d.Dir, "boot-entries.json"), "--keys-out", logKeys); err != nil {
		return fmt.Errorf("fetch the log's keys: %w", err)
	}
	cmd := exec.Command(filepath.Join(*bin, "ctx"), "witness", "serve", "--key", demoWitness.keyFile, "--name", demoWitnessName,
		"--state", filepath.Join(d.Dir, "witness-state.json"), "--log-keys", logKeys, "--listen", demoWitness.addr)
	if err := d.Spawn(cmd); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", demoWitness.addr); err == nil {
			c.Close()
			fmt.Printf("   witness %s on http://%s (ctx witness serve), cosigning the audit checkpoints\n", demoWitnessName, demoWitness.addr)
			return d.awaitWitnessed()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the witness did not start")
}

// awaitWitnessed waits until the witness cosigned the log's checkpoint:
// with a witness configured (witness_policy require, the default) the
// daemon dispatches nothing until its witnesses answer, and it asks again
// every second while one does not.
func (d *demo) awaitWitnessed() error {
	deadline := time.Now().Add(20 * time.Second)
	var out []byte
	for time.Now().Before(deadline) {
		var err error
		if out, err = d.ctxOut("integrity", "-o", "json"); err == nil && bytes.Contains(out, []byte(`"witnessing": "cosigned"`)) {
			fmt.Println("   $ ctx integrity")
			d.ctx("integrity")
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the witness did not cosign the log: %s", out)
}

func shorten(key string) string {
	if i := strings.LastIndexByte(key, '+'); i > 0 && len(key) > i+9 {
		return key[:i+9] + "…"
	}
	return key
}
