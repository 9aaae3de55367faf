package packet

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// LogEvent is one stored event of a tenant's stream, as the audit export
// carries it: its stream sequence, subject and signed envelope.
type LogEvent struct {
	Seq      uint64
	Subject  string
	Envelope codec.Envelope
}

// BuildInput is what Build makes a packet of.
type BuildInput struct {
	Tenant string
	// Decision names the decision record: its stream sequence (the seq of
	// ctx decisions) or its event id.
	Decision string
	// Log is the tenant's events in stream order (an audit export).
	Log []LogEvent
	// Manifest is the configuration subset of the decision's capability;
	// Build fills its pins from the log.
	Manifest Manifest
	// Keys are the public keys the events were signed with.
	Keys codec.Keyring
	// Subject is the stream subject of a kernel key (aggregates.RefOf).
	Subject func(kernel.Key) (string, error)
}

// Build finds a proposal's decision record in a log and assembles its
// packet: the proposal as its record and its operation's opening name it,
// the decision time and ids of the opening batch, and, for every subject
// the step reads, the events stored before that batch. It fails for a
// record that is not a proposal's (a reconciliation's, say), or whose
// arguments were recorded by their digest alone.
func Build(in BuildInput) (*Packet, error) {
	di := -1
	for i, e := range in.Log {
		if e.Envelope.Type == kernel.TypeDecisionRecorded && (strconv.FormatUint(e.Seq, 10) == in.Decision || e.Envelope.EventID == in.Decision) {
			di = i
			break
		}
	}
	if di < 0 {
		return nil, fmt.Errorf("no decision record %s in the log", in.Decision)
	}
	dec := in.Log[di]
	ev, err := kernel.DecodeCanonicalEvent(dec.Envelope.Type, dec.Envelope.V, dec.Envelope.Body)
	if err != nil {
		return nil, err
	}
	rec := ev.(kernel.DecisionRecorded)
	if rec.ArgumentsOmitted || len(rec.Arguments) == 0 {
		return nil, fmt.Errorf("decision %s recorded its arguments by digest alone: its proposal cannot be rebuilt", in.Decision)
	}
	// The batch that opened the operation: the latest operation.opened of
	// the operation on the record's subject, at or before the record.
	oi := -1
	var opened kernel.OperationOpened
	for i := di; i >= 0; i-- {
		e := in.Log[i]
		if e.Subject != dec.Subject || e.Envelope.Type != kernel.TypeOperationOpened {
			continue
		}
		ev, err := kernel.DecodeCanonicalEvent(e.Envelope.Type, e.Envelope.V, e.Envelope.Body)
		if err != nil {
			return nil, err
		}
		if o := ev.(kernel.OperationOpened); o.OperationID == rec.OperationID {
			oi, opened = i, o
			break
		}
	}
	if oi < 0 {
		return nil, fmt.Errorf("decision %s: the opening of operation %s is not in the log", in.Decision, rec.OperationID)
	}
	openSeq := in.Log[oi].Seq
	body, err := json.Marshal(kernel.Proposal{RunID: rec.RunID, OperationKey: opened.OperationKey, CapabilityID: rec.CapabilityID,
		Arguments: rec.Arguments, EvidenceRefs: rec.EvidenceRefs, ApprovalID: rec.Controls.ApprovalID})
	if err != nil {
		return nil, err
	}
	attemptID := rec.AttemptID
	if attemptID == "" && rec.Status != wire.StatusRefused {
		return nil, fmt.Errorf("decision %s names no attempt", in.Decision)
	}
	p := &Packet{V: Version, Tenant: in.Tenant, Decision: dec.Envelope, Manifest: in.Manifest, Keys: map[string]string{},
		Input: Input{Principal: rec.Principal, Proposal: body, Now: in.Log[oi].Envelope.Time, OperationID: rec.OperationID,
			AttemptID: attemptID, Executor: opened.Executor, TraceID: rec.TraceID, Pack: opened.Pack}}
	if p.Input.AttemptID == "" {
		// A refused proposal minted an attempt id that nothing recorded;
		// the step uses it only for what it dispatches.
		p.Input.AttemptID = "unrecorded"
	}
	before := func(subject string) []codec.Envelope {
		out := []codec.Envelope{}
		for _, e := range in.Log[:oi] {
			if e.Subject == subject && e.Seq < openSeq {
				out = append(out, e.Envelope)
			}
		}
		return out
	}
	// The pins of the covering guarantees, as the log stored them.
	p.Manifest.Tenant.Pins = nil
	for _, g := range p.Manifest.Guarantees {
		pin := Pin{GuaranteeID: g.Definition.ID}
		if g.Definition.Replaces != "" {
			pin.Replaced = []string{g.Definition.Replaces}
		}
		subj, err := in.Subject(kernel.KeyPin(g.Definition.ID))
		if err != nil {
			return nil, err
		}
		for _, e := range before(subj) {
			ev, err := kernel.DecodeCanonicalEvent(e.Type, e.V, e.Body)
			if err != nil {
				return nil, err
			}
			if gp, ok := ev.(kernel.GuaranteePinned); ok && pin.Pin == nil {
				pin.Pin = &kernel.Pin{Tenant: gp.Tenant, Definition: gp.Definition, Digest: gp.DefinitionDigest}
			}
		}
		p.Manifest.Tenant.Pins = append(p.Manifest.Tenant.Pins, pin)
	}
	pi, err := p.ProposeInput()
	if err != nil {
		return nil, err
	}
	for _, r := range pi.Step().Reads() {
		subj := dec.Subject
		if r.Key.Kind != kernel.KindOperation {
			if subj, err = in.Subject(r.Key); err != nil {
				return nil, err
			}
		}
		p.Subjects = append(p.Subjects, SubjectOf(r.Key, before(subj)))
	}
	use := func(e codec.Envelope) error {
		pub, ok := in.Keys[e.KeyID]
		if !ok || len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("event %s is signed by key %s, which the keys given do not hold", e.EventID, e.KeyID)
		}
		p.Keys[e.KeyID] = base64.RawURLEncoding.EncodeToString(pub)
		return nil
	}
	if err := use(dec.Envelope); err != nil {
		return nil, err
	}
	for _, s := range p.Subjects {
		for _, e := range s.Events {
			if err := use(e); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}
