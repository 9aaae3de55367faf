package packet_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/packet"
)

const capID = "adp_payments.issue_refund"

func definition() kernel.Definition {
	return kernel.Definition{ID: "refunds-per-order", CapabilityIDs: []string{capID}, ResourcePointer: "/order_id",
		AmountPointer: "/amount_minor", Limit: 100000, Unit: "INR_minor"}
}

// subset is the configuration subset of the tests: the refund capability
// (effectful, so fenced), its order ceiling, and agent_a.
func subset() packet.Manifest {
	def := definition()
	return packet.Manifest{Digest: "cfg-digest", MaxProposalBytes: 1 << 16,
		Capability: &packet.Capability{ID: capID, Version: "2026-10", Risk: "medium", Effectful: true, RunAmount: "/amount_minor",
			Policy: &kernel.Policy{MaxAmount: 80000, AmountPointer: "/amount_minor"}},
		Guarantees: []packet.Guarantee{{Definition: def}},
		Tenant: packet.Tenant{ID: "acme", AllowUnadmitted: true, Agent: &packet.Agent{ID: "agent_a", Capabilities: []string{capID}},
			Pins: []packet.Pin{{GuaranteeID: def.ID, Pin: &kernel.Pin{Tenant: "acme", Definition: def, Digest: def.Digest()}}}}}
}

// world is one tenant's subjects as the runtime stores them: signed
// envelopes by kernel key.
type world struct {
	t       *testing.T
	signer  codec.Signer
	pub     ed25519.PublicKey
	m       packet.Manifest
	km      *kernel.Manifest
	store   map[kernel.Key][]codec.Envelope
	n       int
	now     time.Time
	packets []*packet.Packet
	log     []packet.LogEvent // every event, as an audit export lists them
	seqs    []uint64          // the stream sequence of each packet's decision
}

// subjectOf is the test's stream subject of a key.
func subjectOf(k kernel.Key) (string, error) {
	return fmt.Sprintf("ctx.ev.acme.%s|%s|%s|%s", k.Kind, k.ID, k.Sub, k.Window), nil
}

func (w *world) append(k kernel.Key, ev kernel.Event) codec.Envelope {
	w.t.Helper()
	env, err := w.signer.Seal(ev.EventType(), kernel.EventVersion, w.id(), "acme", codec.FormatTime(w.now), ev)
	if err != nil {
		w.t.Fatal(err)
	}
	w.store[k] = append(w.store[k], env)
	subj, _ := subjectOf(k)
	w.log = append(w.log, packet.LogEvent{Seq: uint64(len(w.log) + 1), Subject: subj, Envelope: env})
	return env
}

func newWorld(t *testing.T) *world {
	t.Helper()
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	w := &world{t: t, signer: codec.NewSigner(key), pub: key.Public().(ed25519.PublicKey), m: subset(),
		store: map[kernel.Key][]codec.Envelope{}, now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	km, err := w.m.KernelManifest("agent_a")
	if err != nil {
		t.Fatal(err)
	}
	w.km = km
	def := definition()
	w.append(kernel.KeyPin(def.ID), kernel.GuaranteePinned{Tenant: "acme", Definition: def, DefinitionDigest: def.Digest()})
	return w
}

func (w *world) id() string {
	w.n++
	return fmt.Sprintf("01J%023d", w.n)
}

// run decides a step over the folded store, appends its events signed,
// and returns its effects and the envelopes it appended by key.
func (w *world) run(step kernel.Step) (kernel.Effects, map[kernel.Key][]codec.Envelope) {
	w.t.Helper()
	l := kernel.Loaded{}
	for _, r := range step.Reads() {
		st := r.Key.New()
		for _, e := range w.store[r.Key] {
			ev, err := kernel.DecodeCanonicalEvent(e.Type, e.V, e.Body)
			if err != nil {
				w.t.Fatal(err)
			}
			if err := st.Apply(ev); err != nil {
				w.t.Fatal(err)
			}
		}
		l[r.Key] = st
	}
	eff := step.Decide(l)
	out := map[kernel.Key][]codec.Envelope{}
	for _, r := range step.Reads() { // in the reads' order: the ids are the same every run
		k := r.Key
		for _, ev := range eff.Append[k] {
			out[k] = append(out[k], w.append(k, ev))
		}
	}
	return eff, out
}

// propose runs a proposal and, when dispatched, settles it with outcome;
// it returns the packet of its decision.
func (w *world) propose(opKey, order string, amount int, outcome kernel.Outcome) *packet.Packet {
	w.t.Helper()
	w.now = w.now.Add(time.Minute)
	body := fmt.Sprintf(`{"run_id":"run_1","operation_key":%q,"capability_id":%q,"arguments":{"order_id":%q,"amount_minor":%d}}`, opKey, capID, order, amount)
	in := kernel.ProposeInput{Manifest: w.km, Tenant: "acme", Principal: "agent_a", Body: []byte(body), Now: w.now,
		OperationID: "op_" + opKey, AttemptID: "att_" + opKey, Executor: "replica-1", TraceID: "trace-" + opKey}
	step := in.Step()
	p := &packet.Packet{V: packet.Version, Tenant: "acme", Manifest: w.m,
		Input: packet.Input{Principal: "agent_a", Proposal: json.RawMessage(body), Now: codec.FormatTime(w.now),
			OperationID: in.OperationID, AttemptID: in.AttemptID, Executor: in.Executor, TraceID: in.TraceID},
		Keys: map[string]string{w.signer.KeyID: base64.RawURLEncoding.EncodeToString(w.pub)}}
	for _, r := range step.Reads() {
		p.Subjects = append(p.Subjects, packet.SubjectOf(r.Key, append([]codec.Envelope(nil), w.store[r.Key]...)))
	}
	eff, out := w.run(step)
	opEnvs := out[kernel.KeyOperation("run_1", opKey)]
	if eff.Dispatch != nil {
		_, out = w.run(eff.Dispatch.Settle(outcome, "prov-"+opKey, w.now).Step())
		opEnvs = out[eff.Dispatch.Operation]
	}
	for _, e := range opEnvs {
		if e.Type == kernel.TypeDecisionRecorded {
			p.Decision = e
		}
	}
	for _, l := range w.log {
		if l.Envelope.EventID == p.Decision.EventID {
			w.seqs = append(w.seqs, l.Seq)
		}
	}
	if p.Decision.Type == "" {
		w.t.Fatalf("proposal %s recorded no decision", opKey)
	}
	w.packets = append(w.packets, p)
	return p
}

// roundTrip marshals and parses a packet, as ctx writes and reads it.
func roundTrip(t *testing.T, p *packet.Packet) *packet.Packet {
	t.Helper()
	b, err := packet.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := packet.Parse(b)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return q
}

func replay(t *testing.T, p *packet.Packet) packet.Result {
	t.Helper()
	if err := p.Verify(nil); err != nil {
		t.Fatal(err)
	}
	res, err := p.Replay()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// story decides applied, pending (unknown to the provider), a same-action
// resend refused by the fence, a policy refusal and an exceeded ceiling.
func story(t *testing.T) *world {
	w := newWorld(t)
	w.propose("k1", "ord_1", 40000, kernel.OutcomeApplied)
	w.propose("k2", "ord_1", 30000, kernel.OutcomeUnknown)
	w.propose("k3", "ord_1", 30000, kernel.OutcomeApplied) // same action as k2 under a new key
	w.propose("k4", "ord_2", 90000, kernel.OutcomeApplied) // over the policy's max
	w.propose("k5", "ord_1", 40000, kernel.OutcomeApplied) // 40000 + 30000 held + 40000 > 100000
	return w
}

func TestPacketReplayReachesEveryRecordedDecision(t *testing.T) {
	w := story(t)
	want := []string{"applied", "unknown", "refused shared_guarantee_unresolved_attempt", "refused policy_denied", "refused shared_guarantee_exceeded"}
	for i, p := range w.packets {
		res := replay(t, roundTrip(t, p))
		if !res.Equal {
			t.Fatalf("packet %d: %s", i, res.Difference)
		}
		if res.Recorded != want[i] {
			t.Fatalf("packet %d recorded %q, want %q", i, res.Recorded, want[i])
		}
	}
}

// TestBuildFromTheLog: a packet built from the log (the audit export's
// events) and the configuration subset replays every decision equal, and
// holds what the hand-made packet holds.
func TestBuildFromTheLog(t *testing.T) {
	w := story(t)
	m := subset()
	m.Tenant.Pins = nil
	kr := codec.Keyring{}
	kr.Add(w.pub)
	for i, want := range w.packets {
		p, err := packet.Build(packet.BuildInput{Tenant: "acme", Decision: fmt.Sprint(w.seqs[i]), Log: w.log, Manifest: m, Keys: kr, Subject: subjectOf})
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		res := replay(t, roundTrip(t, p))
		if !res.Equal {
			t.Fatalf("packet %d built from the log: %s", i, res.Difference)
		}
		for j := range want.Subjects {
			if len(p.Subjects[j].Events) != len(want.Subjects[j].Events) {
				t.Fatalf("packet %d: subject %s: %d events, want %d", i, want.Subjects[j].Kind, len(p.Subjects[j].Events), len(want.Subjects[j].Events))
			}
		}
	}
	if _, err := packet.Build(packet.BuildInput{Tenant: "acme", Decision: "999999", Log: w.log, Manifest: m, Keys: kr, Subject: subjectOf}); err == nil {
		t.Fatal("built a packet of a decision the log does not hold")
	}
	if _, err := packet.Build(packet.BuildInput{Tenant: "acme", Decision: fmt.Sprint(w.seqs[0]), Log: w.log, Manifest: m, Keys: codec.Keyring{}, Subject: subjectOf}); err == nil {
		t.Fatal("built a packet without the keys that signed it")
	}
}

func TestPacketTamperedIsRefused(t *testing.T) {
	w := story(t)
	p := roundTrip(t, w.packets[4])
	// An earlier reservation made smaller, so the ceiling would not refuse.
	var led *packet.Subject
	for i := range p.Subjects {
		if p.Subjects[i].Kind == "ledger" {
			led = &p.Subjects[i]
		}
	}
	if led == nil || len(led.Events) == 0 {
		t.Fatal("the packet read no ledger events")
	}
	e := &led.Events[0]
	e.Body = json.RawMessage(strings.Replace(string(e.Body), `"amount":40000`, `"amount":4000`, 1))
	if !strings.Contains(string(e.Body), `"amount":4000,`) {
		t.Fatalf("the reservation's amount was not found: %s", e.Body)
	}
	if err := p.Verify(nil); !errors.Is(err, packet.ErrRefused) {
		t.Fatalf("a changed event verified: %v", err)
	}
	// The decision itself changed.
	p = roundTrip(t, w.packets[4])
	p.Decision.Body = json.RawMessage(strings.Replace(string(p.Decision.Body), "shared_guarantee_exceeded", "policy_denied", 1))
	if err := p.Verify(nil); !errors.Is(err, packet.ErrRefused) {
		t.Fatalf("a changed decision verified: %v", err)
	}
	// Signed by a key the auditor does not trust.
	p = roundTrip(t, w.packets[4])
	other := codec.Keyring{}
	other.Add(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize)).Public().(ed25519.PublicKey))
	if err := p.Verify(other); !errors.Is(err, packet.ErrRefused) {
		t.Fatalf("a packet verified under keys that did not sign it: %v", err)
	}
	// A key filed under another's id.
	p = roundTrip(t, w.packets[4])
	for id, k := range p.Keys {
		delete(p.Keys, id)
		p.Keys["not-"+id] = k
	}
	if err := p.Verify(nil); !errors.Is(err, packet.ErrRefused) {
		t.Fatalf("a misfiled key verified: %v", err)
	}
}

func TestPacketChangedInputNamesTheStage(t *testing.T) {
	w := story(t)
	cases := []struct {
		name   string
		packet int
		change func(p *packet.Packet)
		stage  string
		field  string
	}{
		{"amount", 4, func(p *packet.Packet) {
			p.Input.Proposal = json.RawMessage(strings.Replace(string(p.Input.Proposal), "40000", "10000", 1))
		}, "binding", "action_digest"},
		{"limit", 4, func(p *packet.Packet) {
			p.Manifest.Tenant.Pins[0].Pin.Definition.Limit = 200000
			p.Manifest.Tenant.Pins[0].Pin.Digest = p.Manifest.Tenant.Pins[0].Pin.Definition.Digest()
			p.Manifest.Guarantees[0].Definition = p.Manifest.Tenant.Pins[0].Pin.Definition
		}, "exposure", "guarantees"},
		{"ledger left out", 4, func(p *packet.Packet) {
			for i := range p.Subjects {
				if p.Subjects[i].Kind == "ledger" {
					p.Subjects[i].Events = nil
				}
			}
		}, "exposure", "guarantees"},
		// The policy's digest is bound into the action digest.
		{"policy", 3, func(p *packet.Packet) { p.Manifest.Capability.Policy.MaxAmount = 0 }, "binding", "action_digest"},
		{"capability version", 3, func(p *packet.Packet) { p.Manifest.Capability.Version = "2027-01" }, "binding", "action_digest"},
		{"risk", 0, func(p *packet.Packet) { p.Manifest.Capability.Risk = "low" }, "controls", "risk"},
		{"fence off", 2, func(p *packet.Packet) { p.Manifest.Capability.NoSameActionFence = true }, "decision", "decision"},
		{"authority", 0, func(p *packet.Packet) { p.Manifest.Tenant.Agent.Capabilities = nil }, "controls", "authority"},
		{"executor", 0, func(p *packet.Packet) { p.Input.Executor = "replica-2" }, "controls", "executor"},
		{"configuration", 1, func(p *packet.Packet) { p.Manifest.Digest = "other" }, "record", "manifest_digest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := roundTrip(t, w.packets[c.packet])
			c.change(p)
			res := replay(t, roundTrip(t, p))
			if res.Equal {
				t.Fatal("a changed packet replayed equal")
			}
			if d := res.Difference; d.Stage != c.stage || d.Field != c.field {
				t.Fatalf("difference %s, want stage %s field %s", d, c.stage, c.field)
			}
		})
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	w := story(t)
	good, err := packet.Marshal(w.packets[0])
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{
		"unknown member": strings.Replace(string(good), `"v":1,`, `"v":1,"extra":1,`, 1),
		"twice":          strings.Replace(string(good), `"v":1,`, `"v":1,"v":1,`, 1),
		"version":        strings.Replace(string(good), `"v":1,`, `"v":2,`, 1),
		"kind":           strings.Replace(string(good), `"kind":"run"`, `"kind":"nothing"`, 1),
		"tenant":         strings.Replace(string(good), `"tenant":"acme"`, `"tenant":"other"`, 1),
		"not json":       "{",
	} {
		if _, err := packet.Parse([]byte(b)); !errors.Is(err, packet.ErrMalformed) {
			t.Errorf("%s: parsed: %v", name, err)
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.packet.json")

// TestPacketGolden keeps one packet of each recorded decision kind of the
// story in testdata, which ctx's tests replay: the story's keys and ids are
// fixed, so the files change only when the format or a decision does.
func TestPacketGolden(t *testing.T) {
	w := story(t)
	names := []string{"applied", "unknown", "fenced", "policy-denied", "exceeded"}
	for i, p := range w.packets {
		b, err := packet.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", names[i]+".packet.json")
		if *update {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Errorf("%s differs from the story's packet (go test ./packet -run TestPacketGolden -update)", path)
		}
	}
}
