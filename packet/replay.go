package packet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// KernelManifest builds the kernel's manifest from the packet's subset:
// the one capability, the guarantees that cover it, the tenant with the
// principal's agent and the pins.
func (m Manifest) KernelManifest(principal string) (*kernel.Manifest, error) {
	km := &kernel.Manifest{Capabilities: map[string]*kernel.Capability{}, Tenants: map[string]*kernel.Tenant{},
		MaxProposalBytes: m.MaxProposalBytes, Digest: m.Digest}
	if c := m.Capability; c != nil {
		kc := &kernel.Capability{ID: c.ID, Version: c.Version, Risk: c.Risk, Effectful: c.Effectful, Approval: c.Approval,
			RunAmount: c.RunAmount, DecisionKey: c.DecisionKey, NoSameActionFence: c.NoSameActionFence}
		if c.Policy != nil {
			cp, err := kernel.CompilePolicy(*c.Policy)
			if err != nil {
				return nil, fmt.Errorf("capability %s: policy: %w", c.ID, err)
			}
			kc.Policy = cp
		}
		if len(c.Pack) > 0 {
			pack, err := kernel.ParseContextPack(c.Pack)
			if err != nil {
				return nil, fmt.Errorf("capability %s: pack: %w", c.ID, err)
			}
			kc.Pack = &pack
		}
		var err error
		kc.Breaker.Threshold = c.BreakerThreshold
		if kc.Breaker.Window, err = duration(c.BreakerWindow); err != nil {
			return nil, fmt.Errorf("capability %s: breaker_window: %w", c.ID, err)
		}
		if kc.Grace, err = duration(c.Grace); err != nil {
			return nil, fmt.Errorf("capability %s: grace: %w", c.ID, err)
		}
		km.Capabilities[c.ID] = kc
	}
	for _, g := range m.Guarantees {
		kg := kernel.Guarantee{Definition: g.Definition}
		if g.Zone != "" {
			z, err := time.LoadLocation(g.Zone)
			if err != nil {
				return nil, fmt.Errorf("guarantee %s: zone: %w", g.Definition.ID, err)
			}
			kg.Zone = z
		}
		km.Guarantees = append(km.Guarantees, kg)
	}
	t := &kernel.Tenant{ID: m.Tenant.ID, AllowUnadmitted: m.Tenant.AllowUnadmitted, Agents: map[string]*kernel.Agent{},
		Pins: map[string]kernel.PinnedGuarantee{}}
	if a := m.Tenant.Agent; a != nil {
		if a.ID != principal {
			return nil, fmt.Errorf("the agent %q is not the proposing principal %q", a.ID, principal)
		}
		t.Agents[a.ID] = &kernel.Agent{ID: a.ID, Capabilities: a.Capabilities, EvidenceSources: a.EvidenceSources}
	}
	for _, p := range m.Tenant.Pins {
		pg := kernel.PinnedGuarantee{Pin: p.Pin, Replaced: p.Replaced}
		if p.Refusal != nil {
			pg.Refusal = &kernel.Refusal{Code: p.Refusal.Code, Reason: p.Refusal.Reason}
		}
		t.Pins[p.GuaranteeID] = pg
	}
	km.Tenants[t.ID] = t
	return km, nil
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// ProposeInput returns the step's input: the packet's proposal under its
// manifest.
func (p *Packet) ProposeInput() (kernel.ProposeInput, error) {
	m, err := p.Manifest.KernelManifest(p.Input.Principal)
	if err != nil {
		return kernel.ProposeInput{}, err
	}
	now, err := time.Parse(codec.TimeLayout, p.Input.Now)
	if err != nil {
		return kernel.ProposeInput{}, err
	}
	in := p.Input
	return kernel.ProposeInput{Manifest: m, Tenant: p.Tenant, Principal: in.Principal, Body: in.Proposal, Now: now,
		OperationID: in.OperationID, AttemptID: in.AttemptID, Executor: in.Executor, TraceID: in.TraceID, Pack: in.Pack,
		Witness: kernel.WitnessStatus{Policy: kernel.WitnessPolicy(in.Witness.Policy), State: kernel.Witnessing(in.Witness.State), Reason: in.Witness.Reason}}, nil
}

// Result is the outcome of a replay.
type Result struct {
	// Equal is true when the step reached the recorded decision.
	Equal bool
	// Difference names the first stage that differs (Stages), empty when
	// Equal.
	Difference *Difference
	// Recorded and Replayed are the decision as signed and as the step
	// made it again ("refused <code>" or "dispatched").
	Recorded, Replayed string
}

// Difference is the first field, of the first stage, that differs.
type Difference struct {
	Stage    string `json:"stage"`
	Field    string `json:"field"`
	Recorded string `json:"recorded"`
	Replayed string `json:"replayed"`
}

// String names the stage, the field and both values.
func (d *Difference) String() string {
	return fmt.Sprintf("stage %s: %s: recorded %s, replayed %s", d.Stage, d.Field, d.Recorded, d.Replayed)
}

// Stages are the stages Replay compares, in order, with the record's
// fields each holds: what was bound, what the gate read, the controls,
// the run budget, the exposure, then the decision itself and the rest of
// the record. A difference in an earlier stage explains a later one.
var Stages = []string{"binding", "context", "controls", "budget", "exposure", "decision", "record"}

// Replay folds the packet's subjects into the states the step reads, runs
// the kernel's proposal step and compares its decision with the signed
// record. A packet Verify refuses must not be replayed; Replay does not
// check signatures. An error means the packet cannot be replayed at all.
func (p *Packet) Replay() (Result, error) {
	ev, err := kernel.DecodeCanonicalEvent(p.Decision.Type, p.Decision.V, p.Decision.Body)
	if err != nil {
		return Result{}, err
	}
	rec, ok := ev.(kernel.DecisionRecorded)
	if !ok {
		return Result{}, fmt.Errorf("the decision is not a decision record")
	}
	in, err := p.ProposeInput()
	if err != nil {
		return Result{}, err
	}
	folded := map[kernel.Key]kernel.Aggregate{}
	for _, s := range p.Subjects {
		k, err := s.Key()
		if err != nil {
			return Result{}, err
		}
		st := k.New()
		for j, e := range s.Events {
			ev, err := kernel.DecodeCanonicalEvent(e.Type, e.V, e.Body)
			if err != nil {
				return Result{}, fmt.Errorf("%s event %d: %w", k, j, err)
			}
			if err := st.Apply(ev); err != nil {
				return Result{}, fmt.Errorf("%s event %d does not fold: %w", k, j, err)
			}
		}
		folded[k] = st
	}
	step := in.Step()
	l := kernel.Loaded{}
	for _, r := range step.Reads() {
		if st, ok := folded[r.Key]; ok {
			l[r.Key] = st
		} else {
			l[r.Key] = r.Key.New() // a subject with no events is empty
		}
	}
	eff := step.Decide(l)
	res := Result{Recorded: describe(rec.Status, rec.Code)}
	var got kernel.DecisionRecorded
	dispatched := false
	switch {
	case eff.Dispatch != nil:
		d := eff.Dispatch
		dispatched = true
		res.Replayed = "dispatched"
		got = kernel.DecisionRecorded{OperationID: in.OperationID, Principal: in.Principal, RunID: rec.RunID, CapabilityID: d.CapabilityID,
			AttemptID: d.AttemptID, Controls: d.Controls, DecisionTrace: d.Controls.Trace}
		got.ActionDigest = opened(eff, d.Operation).ActionDigest
		if pk := opened(eff, d.Operation).Pack; pk != nil {
			got.PackID, got.PackVersion, got.PackDigest = pk.PackID, pk.Version, pk.Digest
		}
	case eff.Refusal != nil && eff.Unbound == nil:
		for _, evs := range eff.Append {
			for _, e := range evs {
				if r, ok := e.(kernel.DecisionRecorded); ok {
					got = r
				}
			}
		}
		res.Replayed = describe(got.Status, got.Code)
	case eff.Unbound != nil:
		res.Replayed = describe(wire.StatusRefused, eff.Unbound.Code) + " before any operation"
		res.Difference = &Difference{Stage: "binding", Field: "operation", Recorded: "recorded on operation " + rec.OperationID, Replayed: res.Replayed}
		return res, nil
	default:
		res.Replayed = "the operation already existed"
		res.Difference = &Difference{Stage: "binding", Field: "operation", Recorded: "opened " + rec.OperationID, Replayed: res.Replayed}
		return res, nil
	}
	res.Difference = compare(rec, got, dispatched && rec.Status != wire.StatusRefused)
	res.Equal = res.Difference == nil
	return res, nil
}

func describe(s wire.Status, c wire.Code) string {
	if s == wire.StatusRefused {
		return "refused " + string(c)
	}
	return string(s)
}

// opened is the operation.opened the step appends to the operation.
func opened(eff kernel.Effects, k kernel.Key) kernel.OperationOpened {
	var o kernel.OperationOpened
	for _, e := range eff.Append[k] {
		if v, ok := e.(kernel.OperationOpened); ok {
			o = v
		}
	}
	return o
}

// compare returns the first field, in Stages order, on which the replayed
// record differs from the recorded one. A dispatched decision's record was
// made at settlement: its status is the provider's report, its balances
// are after it and its generation the settling one, none of which the
// proposal step decides; they are not compared.
func compare(rec, got kernel.DecisionRecorded, settled bool) *Difference {
	dispatched := settled
	type field struct {
		stage, name string
		a, b        any
	}
	holds := func(hs []kernel.GuaranteeHold) any {
		if !dispatched {
			return hs
		}
		out := make([]kernel.GuaranteeHold, len(hs))
		for i, h := range hs {
			out[i] = kernel.GuaranteeHold{GuaranteeID: h.GuaranteeID, DefinitionDigest: h.DefinitionDigest, Resource: h.Resource, Amount: h.Amount}
		}
		return out
	}
	decision := func(r kernel.DecisionRecorded) string {
		if r.Status == "" || r.Status != wire.StatusRefused {
			return "dispatched" // a replayed dispatch has no status; a recorded one, the provider's
		}
		return describe(r.Status, r.Code)
	}
	rc, gc := rec.Controls, got.Controls
	fields := []field{
		{"binding", "operation_id", rec.OperationID, got.OperationID},
		{"binding", "principal", rec.Principal, got.Principal},
		{"binding", "run_id", rec.RunID, got.RunID},
		{"binding", "capability_id", rec.CapabilityID, got.CapabilityID},
		{"binding", "action_digest", rec.ActionDigest, got.ActionDigest},
		{"binding", "arguments_digest", rec.ArgumentsDigest, got.ArgumentsDigest},
		{"binding", "arguments", rec.Arguments, got.Arguments},
		{"context", "pack", [3]string{rec.PackID, rec.PackVersion, rec.PackDigest}, [3]string{got.PackID, got.PackVersion, got.PackDigest}},
		{"context", "evidence_refs", rec.EvidenceRefs, got.EvidenceRefs},
		{"context", "context_digest", rec.ContextDigest, got.ContextDigest},
		{"context", "obligations", rec.Obligations, got.Obligations},
		{"context", "resolution_refs", rec.ResolutionRefs, got.ResolutionRefs},
		{"context", "evidence_gate", rc.EvidenceGate, gc.EvidenceGate},
		{"controls", "authority", rc.Authority, gc.Authority},
		{"controls", "capability_version", rc.CapabilityVersion, gc.CapabilityVersion},
		{"controls", "risk", rc.Risk, gc.Risk},
		{"controls", "policy_digest", rc.PolicyDigest, gc.PolicyDigest},
		{"controls", "approval_id", rc.ApprovalID, gc.ApprovalID},
		{"controls", "executor", rc.Executor, gc.Executor},
		{"budget", "run_budget", rc.RunBudget, gc.RunBudget},
		{"exposure", "guarantees", holds(rc.Guarantees), holds(gc.Guarantees)},
		{"decision", "decision", decision(rec), decision(got)},
		{"record", "attempt_id", rec.AttemptID, got.AttemptID},
		{"record", "manifest_digest", rec.ManifestDigest, got.ManifestDigest},
		{"record", "trace_id", rec.TraceID, got.TraceID},
	}
	if !dispatched {
		fields = append(fields, field{"record", "reason", rec.Reason, got.Reason}, field{"record", "generation", rc.Generation, gc.Generation})
	}
	for _, f := range fields {
		a, b := text(f.a), text(f.b)
		if a != b {
			return &Difference{Stage: f.stage, Field: f.name, Recorded: a, Replayed: b}
		}
	}
	return nil
}

// text is a value as compared and shown: its canonical JSON (a signed
// record holds its gate in RFC 8785 member order, the step in Go's), with
// empty and absent alike.
func text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if c, err := kernel.Canonical(json.RawMessage(b)); err == nil {
		b = c
	}
	switch string(b) {
	case "null", `""`, "[]", "{}":
		return "(none)"
	}
	return string(b)
}
