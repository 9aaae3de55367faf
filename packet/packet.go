package packet

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// Version is the format version a packet carries in V.
const Version = 1

// MaxBytes bounds a packet file: a decision reads a few dozen subjects, a
// hot ledger lists at most 1,536 receipts.
const MaxBytes = 64 << 20

// Packet is one decision and everything its step read.
type Packet struct {
	V      int    `json:"v"`
	Tenant string `json:"tenant"`
	// Decision is the signed decision.recorded event.
	Decision codec.Envelope `json:"decision"`
	// Input is what the runtime supplied to the step besides the states.
	Input Input `json:"input"`
	// Manifest is the configuration subset the decision was made under.
	Manifest Manifest `json:"manifest"`
	// Subjects are the subjects the step read, each with its signed events
	// up to the decision (its reads, in the step's order).
	Subjects []Subject `json:"subjects"`
	// Keys are the public keys that signed the events, by key id
	// (base64url, no padding).
	Keys map[string]string `json:"keys"`
}

// Input is the proposal and what the runtime supplied with it
// (kernel.ProposeInput without the manifest).
type Input struct {
	Principal   string          `json:"principal"`
	Proposal    json.RawMessage `json:"proposal"` // the proposal as published
	Now         string          `json:"now"`      // codec.TimeLayout
	OperationID string          `json:"operation_id"`
	AttemptID   string          `json:"attempt_id"`
	Executor    string          `json:"executor"`
	TraceID     string          `json:"trace_id,omitempty"`
	// Pack is the context pack version the gate was compiled under.
	Pack *kernel.PackRef `json:"pack,omitempty"`
	// Witness is the runtime's view of its witnesses: the policy and
	// whether the log was witnessed (state), and why not.
	Witness Witness `json:"witness"`
}

// Witness is kernel.WitnessStatus as a packet carries it.
type Witness struct {
	Policy string `json:"policy,omitempty"`
	State  int    `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Manifest is the part of kernel.Manifest that decides a proposal of one
// capability: the capability, the guarantees that cover it and the
// proposing principal's tenant and agent.
type Manifest struct {
	// Digest is the digest of the whole configuration (the record's
	// manifest_digest); the subset cannot recompute it.
	Digest           string      `json:"digest"`
	MaxProposalBytes int         `json:"max_proposal_bytes,omitempty"`
	Capability       *Capability `json:"capability,omitempty"` // nil: the capability was not surfaced
	Guarantees       []Guarantee `json:"guarantees,omitempty"`
	Tenant           Tenant      `json:"tenant"`
}

// Capability is kernel.Capability as a packet carries it.
type Capability struct {
	ID                string          `json:"id"`
	Version           string          `json:"version"`
	Risk              string          `json:"risk"`
	Effectful         bool            `json:"effectful,omitempty"`
	Approval          string          `json:"approval,omitempty"`
	RunAmount         string          `json:"run_amount,omitempty"`
	Policy            *kernel.Policy  `json:"policy,omitempty"`
	DecisionKey       string          `json:"decision_key,omitempty"`
	Pack              json.RawMessage `json:"pack,omitempty"` // context-pack.json
	BreakerThreshold  int             `json:"breaker_threshold,omitempty"`
	BreakerWindow     string          `json:"breaker_window,omitempty"` // a Go duration
	Grace             string          `json:"grace,omitempty"`          // a Go duration
	NoSameActionFence bool            `json:"no_same_action_fence,omitempty"`
}

// Guarantee is one configured guarantee that covers the capability.
type Guarantee struct {
	Definition kernel.Definition `json:"definition"`
	Zone       string            `json:"zone,omitempty"` // the calendar window's IANA zone; "" is UTC
}

// Tenant is the proposing principal's tenant.
type Tenant struct {
	ID              string `json:"id"`
	AllowUnadmitted bool   `json:"allow_unadmitted,omitempty"`
	// Agent is the principal's agent entry; nil when it is none.
	Agent *Agent `json:"agent,omitempty"`
	Pins  []Pin  `json:"pins,omitempty"`
}

// Agent is kernel.Agent as a packet carries it.
type Agent struct {
	ID              string   `json:"id"`
	Capabilities    []string `json:"capabilities,omitempty"`
	EvidenceSources []string `json:"evidence_sources,omitempty"`
}

// Pin is the tenant's pin of a covering guarantee (kernel.PinnedGuarantee).
type Pin struct {
	GuaranteeID string      `json:"guarantee_id"`
	Pin         *kernel.Pin `json:"pin,omitempty"`
	Refusal     *Refusal    `json:"refusal,omitempty"`
	Replaced    []string    `json:"replaced,omitempty"`
}

// Refusal is the refusal of every proposal a pin covers (kernel.Refusal).
type Refusal struct {
	Code   wire.Code `json:"code"`
	Reason string    `json:"reason"`
}

// Subject is one subject the step read, named by its kernel key.
type Subject struct {
	Kind   string           `json:"kind"`
	ID     string           `json:"id,omitempty"`
	Sub    string           `json:"sub,omitempty"`
	Window string           `json:"window,omitempty"`
	Events []codec.Envelope `json:"events"`
}

// Key returns the subject's kernel key.
func (s Subject) Key() (kernel.Key, error) {
	for k := kernel.Kind(1); k.String() != "invalid"; k++ {
		if k.String() == s.Kind {
			return kernel.Key{Kind: k, ID: s.ID, Sub: s.Sub, Window: s.Window}, nil
		}
	}
	return kernel.Key{}, fmt.Errorf("subject kind %q is unknown", s.Kind)
}

// SubjectOf names key as a Subject with evs.
func SubjectOf(key kernel.Key, evs []codec.Envelope) Subject {
	if evs == nil {
		evs = []codec.Envelope{}
	}
	return Subject{Kind: key.Kind.String(), ID: key.ID, Sub: key.Sub, Window: key.Window, Events: evs}
}

// ErrMalformed is matched (errors.Is) by every error Parse returns.
var ErrMalformed = errors.New("packet: malformed")

type malformed struct{ msg string }

func (e *malformed) Error() string        { return "packet: malformed: " + e.msg }
func (e *malformed) Is(target error) bool { return target == ErrMalformed }

func bad(format string, args ...any) error { return &malformed{fmt.Sprintf(format, args...)} }

// Parse decodes a packet strictly: one JSON object, no unknown member, no
// member twice, every envelope valid (codec.Validate), the decision a
// decision.recorded of the packet's tenant, every subject kind known. It
// never panics; it does not check signatures (Verify).
func Parse(b []byte) (*Packet, error) {
	if len(b) > MaxBytes {
		return nil, bad("%d bytes exceeds %d", len(b), MaxBytes)
	}
	var p Packet
	if err := kernel.StrictJSON(b, &p); err != nil {
		return nil, bad("%v", err)
	}
	if p.V != Version {
		return nil, bad("version %d, want %d", p.V, Version)
	}
	if p.Tenant == "" {
		return nil, bad("tenant is required")
	}
	if err := checkEnvelope(p.Tenant, p.Decision); err != nil {
		return nil, bad("decision: %v", err)
	}
	if p.Decision.Type != kernel.TypeDecisionRecorded {
		return nil, bad("decision is a %s event, want %s", p.Decision.Type, kernel.TypeDecisionRecorded)
	}
	if _, err := time.Parse(codec.TimeLayout, p.Input.Now); err != nil {
		return nil, bad("input.now: %v", err)
	}
	if len(p.Input.Proposal) == 0 {
		return nil, bad("input.proposal is required")
	}
	if p.Manifest.Tenant.ID != p.Tenant {
		return nil, bad("manifest.tenant.id %q is not the packet's tenant %q", p.Manifest.Tenant.ID, p.Tenant)
	}
	seen := map[kernel.Key]bool{}
	for i, s := range p.Subjects {
		k, err := s.Key()
		if err != nil {
			return nil, bad("subjects[%d]: %v", i, err)
		}
		if seen[k] {
			return nil, bad("subjects[%d]: %s appears twice", i, k)
		}
		seen[k] = true
		for j, e := range s.Events {
			if err := checkEnvelope(p.Tenant, e); err != nil {
				return nil, bad("subjects[%d].events[%d]: %v", i, j, err)
			}
		}
	}
	for id, pub := range p.Keys {
		if b, err := base64.RawURLEncoding.DecodeString(pub); err != nil || len(b) != 32 {
			return nil, bad("keys[%q] is not a base64url Ed25519 public key", id)
		}
	}
	return &p, nil
}

func checkEnvelope(tenant string, e codec.Envelope) error {
	if err := codec.Validate(e); err != nil {
		return err
	}
	if e.Tenant != tenant {
		return fmt.Errorf("event %s is of tenant %q", e.EventID, e.Tenant)
	}
	return nil
}

// Marshal encodes a packet in the form Parse reads: compact JSON, the
// envelopes byte for byte as signed (indenting would re-indent their
// canonical bodies), no HTML escaping.
func Marshal(p *Packet) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
