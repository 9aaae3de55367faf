package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// This file holds the gateway side of authorization and of the evidence
// gate: the capability controls of the configuration,
// the subjects they live on, the per-proposal checks that run before the
// reserve transaction and the operator verbs that write them. Every rule is
// a kernel call; docs/authorization.md describes the contract.

// Subjects of the authorization aggregates.

func authorityRef(tenant string) (aggregates.Ref, error) {
	s, err := codec.Subject(tenant, "authority")
	return aggregates.Ref{Subject: s, New: func() aggregates.State { return &kernel.Authority{} }}, err
}

// ApprovalRef is the reference of approval id of tenant.
func ApprovalRef(tenant, id string) (aggregates.Ref, error) {
	s, err := codec.Subject(tenant, "approval", id)
	return aggregates.Ref{Subject: s, New: func() aggregates.State { return &kernel.Approval{} },
		Check: func(ev kernel.Event) error {
			var got string
			switch e := ev.(type) {
			case kernel.ApprovalGranted:
				got = e.ApprovalID
			case kernel.ApprovalRedeemed:
				got = e.ApprovalID
			case kernel.ApprovalDenied:
				got = e.ApprovalID
			}
			if got != id {
				return fmt.Errorf("approval event for %q on the subject of %q", got, id)
			}
			return nil
		}}, err
}

// RunRef is the reference of run runID of tenant.
func RunRef(tenant, runID string) (aggregates.Ref, error) {
	s, err := codec.Subject(tenant, "run", runID)
	return aggregates.Ref{Subject: s, New: func() aggregates.State { return &kernel.Run{} },
		Check: func(ev kernel.Event) error {
			if got := kernel.RunIDOf(ev); got != runID {
				return fmt.Errorf("run event for %q on the subject of %q", got, runID)
			}
			return nil
		}}, err
}

func evidenceRef(tenant, ref string) (aggregates.Ref, error) {
	s, err := codec.Subject(tenant, "evidence", ref)
	return aggregates.Ref{Subject: s, New: func() aggregates.State { return &kernel.EvidenceRecord{} },
		Check: func(ev kernel.Event) error {
			if got := kernel.EvidenceRefOf(ev); got != ref {
				return fmt.Errorf("evidence event for %q on the subject of %q", got, ref)
			}
			return nil
		}}, err
}

// load folds a subject straight from the store. Evidence is read this way
// for every proposal (authority from the changes since the last read, see
// authorities), not from the engine's warm state: both are read-only in the
// reserve transaction, where a stale cache would never be caught by a
// sequence conflict, so a change appended by any replica takes effect for
// the next proposal everywhere.
func (g *Gateway) load(ctx context.Context, ref aggregates.Ref) (aggregates.State, error) {
	stored, err := g.store.Read(ctx, ref.Subject, 1)
	if err != nil {
		return nil, err
	}
	st := ref.New()
	return st, fold(ref, st, stored)
}

// fold applies stored events of ref's subject to st, in order.
func fold(ref aggregates.Ref, st aggregates.State, stored []events.Stored) error {
	for _, s := range stored {
		ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
		if err == nil && ref.Check != nil {
			err = ref.Check(ev)
		}
		if err == nil {
			err = st.Apply(ev)
		}
		if err != nil {
			return &aggregates.StoredEventError{Subject: ref.Subject, Seq: s.Seq, Err: err}
		}
	}
	return nil
}

// Operator verbs of authorization and evidence.

// authzVerbs are the verbs served by authzOp.
var authzVerbs = []string{"grant", "revoke", "approve", "deny", "admit-run", "run", "evidence"}

// authzOp serves an authorization or evidence verb; ok is false for any
// other verb.
func (g *Gateway) authzOp(ctx context.Context, tenant, verb, operator string, body []byte) (wire.OpReply, bool) {
	tc, _ := g.cfg.Tenant(tenant)
	switch verb {
	case "grant", "revoke":
		var req wire.GrantRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opGrant(ctx, tc, operator, verb == "grant", req), true
	case "approve":
		var req wire.ApproveRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opApprove(ctx, tenant, operator, req), true
	case "deny":
		var req wire.DenyRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opDeny(ctx, tenant, operator, req), true
	case "admit-run":
		var req wire.AdmitRunRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opAdmitRun(ctx, tc, operator, req), true
	case "run":
		var req wire.RunRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		ref, err := RunRef(tenant, req.RunID)
		if r := kernel.CheckRunRequest(req, err == nil); r != nil {
			return wire.OpReply{Code: r.Code, Reason: r.Reason}, true
		}
		st, err := g.load(ctx, ref)
		if err != nil {
			return storeRefusal(err), true
		}
		return wire.OpReply{OK: true, Data: map[string]any{"run": st}}, true
	case "evidence":
		var req wire.EvidenceRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opEvidence(ctx, tenant, operator, req), true
	}
	return wire.OpReply{}, false
}

// decodeOp decodes an operator verb's body (kernel.DecodeOpRequest); the
// refusal is the reply to send.
func decodeOp(body []byte, into any) *wire.OpReply {
	if r := kernel.DecodeOpRequest(body, into); r != nil {
		return &wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	return nil
}

func (g *Gateway) opGrant(ctx context.Context, tc *config.TenantConfig, operator string, grant bool, req wire.GrantRequest) wire.OpReply {
	_, agent := tc.Agent(req.Principal)
	_, surfaced := g.cfg.Capability(req.CapabilityID)
	if r := kernel.CheckGrantRequest(tc.ID, req, agent, surfaced); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if _, err := authorityRef(tc.ID); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	cmd := kernel.ChangeAuthority{Principal: req.Principal, CapabilityID: req.CapabilityID, Grant: grant, Operator: operator, Reason: req.Reason}
	eff, err := g.engine.Run(ctx, tc.ID, kernel.VerbStep(kernel.KeyAuthority, func(a *kernel.Authority) (kernel.Decision, any) {
		return kernel.DecideAuthorityChange(a, cmd), nil
	}))
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	recorded := len(eff.Events(kernel.KeyAuthority)) > 0
	return wire.OpReply{OK: true, Data: map[string]any{"principal": req.Principal, "capability_id": req.CapabilityID, "granted": grant, "recorded": recorded}}
}

func (g *Gateway) opApprove(ctx context.Context, tenant, operator string, req wire.ApproveRequest) wire.OpReply {
	ttl, r := kernel.ParseApprovalTTL(req.ExpiresIn)
	if r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	id := g.ids.New()
	if _, err := ApprovalRef(tenant, id); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	cmd := kernel.GrantApproval{ApprovalID: id, ActionDigest: req.ActionDigest, Risk: req.Risk, Operator: operator, Reason: req.Reason,
		Now: g.clock.Now(), TTL: ttl}
	key := kernel.KeyApproval(id)
	eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(key, func(a *kernel.Approval) (kernel.Decision, any) {
		return kernel.DecideApprovalGrant(a, cmd), nil
	}))
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	var granted kernel.ApprovalGranted
	if evs := eff.Events(key); len(evs) == 1 {
		granted, _ = evs[0].(kernel.ApprovalGranted)
	}
	return wire.OpReply{OK: true, Data: map[string]any{"approval_id": id, "action_digest": granted.ActionDigest, "risk": granted.Risk,
		"expires_at": granted.ExpiresAt.Format(time.RFC3339Nano)}}
}

func (g *Gateway) opDeny(ctx context.Context, tenant, operator string, req wire.DenyRequest) wire.OpReply {
	id := req.ApprovalID
	if id == "" {
		id = g.ids.New()
	}
	if _, err := ApprovalRef(tenant, id); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	cmd := kernel.DenyApproval{ApprovalID: id, ActionDigest: req.ActionDigest, Risk: req.Risk, Operator: operator, Reason: req.Reason, Now: g.clock.Now()}
	eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyApproval(id), func(a *kernel.Approval) (kernel.Decision, any) {
		d := kernel.DecideApprovalDeny(a, cmd)
		return d, *kernel.AfterOf(a, d.Events, func(a kernel.Approval) kernel.Approval { return a })
	}))
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	denied := eff.Reply.Data.(kernel.Approval)
	return wire.OpReply{OK: true, Data: map[string]any{"approval_id": id, "action_digest": denied.ActionDigest, "risk": denied.Risk, "denied": true, "reason": req.Reason}}
}

func (g *Gateway) opAdmitRun(ctx context.Context, tc *config.TenantConfig, operator string, req wire.AdmitRunRequest) wire.OpReply {
	_, agent := tc.Agent(req.Principal)
	if r := kernel.CheckAdmitRunRequest(tc.ID, req, agent); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if _, err := RunRef(tc.ID, req.RunID); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	if req.ParentRunID != "" && req.ParentRunID != req.RunID {
		if _, err := RunRef(tc.ID, req.ParentRunID); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
	}
	in := kernel.AdmitRunInput{AdmitRun: kernel.AdmitRun{RunID: req.RunID, ParentRunID: req.ParentRunID, Principal: req.Principal, Operator: operator,
		Calls: req.Calls, Amount: req.Amount, PackSpec: req.Pack}}
	var err error
	if in.Packs, err = g.loadPacks(ctx, tc.ID); err != nil {
		return storeRefusal(err)
	}
	eff, err := g.engine.Run(ctx, tc.ID, in.Step())
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	return wire.OpReply{OK: true, Data: map[string]any{"run": eff.Reply.Data}}
}

func (g *Gateway) opEvidence(ctx context.Context, tenant, operator string, req wire.EvidenceRequest) wire.OpReply {
	candidate, r := kernel.CheckEvidenceRequest(req)
	switch {
	case r != nil:
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	case candidate:
		cands, err := kernel.ParseEvidence(append(append([]byte("["), req.Candidate...), ']'))
		if err != nil {
			return wire.Refused(wire.CodeContextInvalid, "%v", err)
		}
		if _, err := evidenceRef(tenant, cands[0].Ref); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		cmd := kernel.PublishEvidence{Tenant: tenant, Operator: operator, Candidate: cands[0]}
		eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyEvidence(cands[0].Ref), func(r *kernel.EvidenceRecord) (kernel.Decision, any) {
			return kernel.DecidePublishEvidence(r, cmd), nil
		}))
		if err != nil {
			return storeRefusal(err)
		}
		if eff.Refusal != nil {
			return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
		}
		return wire.OpReply{OK: true, Data: map[string]any{"ref": cands[0].Ref}}
	default:
		ms, err := kernel.ParseMarkers(append(append([]byte("["), req.Marker...), ']'))
		if err != nil {
			return wire.Refused(wire.CodeContextInvalid, "%v", err)
		}
		m := ms[0]
		// One atomic batch over every ref the marker names: the marker
		// (and later its resolution) is found through any of them.
		for _, name := range m.EvidenceRefs {
			if _, err := evidenceRef(tenant, name); err != nil {
				return wire.Refused(wire.CodeRequestMalformed, "%v", err)
			}
		}
		eff, err := g.engine.Run(ctx, tenant, kernel.MarkInput{Operator: operator, Marker: m}.Step())
		if err != nil {
			return storeRefusal(err)
		}
		if eff.Refusal != nil {
			return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
		}
		return wire.OpReply{OK: true, Data: map[string]any{"conflict_id": m.ConflictID, "status": m.Status}}
	}
}
