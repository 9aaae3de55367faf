package gateway

import (
	"context"
	"fmt"
	"slices"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// This file serves agents their run's compiled context (wire.ContextSubject
// and the MCP tool wire.ContextTool) and derives the tools an agent sees.
// Both read what a proposal's evidence gate reads and decide through the
// kernel's compiler; neither stores anything nor grants anything: a call to
// a hidden capability is still proposed and refused as before.
//
// The run's context comes from the configuration: the context pack and
// decision of the capability the request names (runs do not pin a pack
// version yet), the evidence refs the request names (the evidence records
// the daemon holds), the agent's evidence sources, and the capabilities it
// holds now (configuration and operator grants, kernel.CheckAuthority).

// AdmitContext is the admission path (admission) for a door that waits for
// the reply, the MCP gateway's.
func (g *Gateway) AdmitContext(ctx context.Context, tenant, principal string, body []byte) wire.ContextReply {
	done := make(chan wire.ContextReply, 1)
	g.admitContext(context.WithoutCancel(ctx), tenant, principal, body, func(r wire.ContextReply) { done <- r })
	return <-done
}

// admitContext passes a compile request through the one admission path
// (identity, body bound, the principal's rate shared with its proposals,
// the tenant's lane) and answers it exactly once.
func (g *Gateway) admitContext(ctx context.Context, tenant, principal string, body []byte, answer func(wire.ContextReply)) {
	r := g.admission(caller{tenant: tenant, principal: principal}, len(body), func(oversize bool) {
		if oversize {
			answer(wire.ContextRefusal(wire.CodeRequestMalformed,
				fmt.Sprintf("compile request of %d bytes exceeds %d", len(body), g.cfg.Runtime.MaxProposalBytes)))
			return
		}
		answer(g.compileContext(ctx, tenant, principal, body))
	})
	if r != nil {
		answer(wire.ContextRefusal(r.Code, r.Reason))
	}
}

// ParseContextRequest decodes a compile request strictly (kernel.
// DecodeRequest), with ids present and bounded like a proposal's.
func ParseContextRequest(b []byte) (wire.ContextRequest, *kernel.Refusal) {
	bad := func(format string, args ...any) (wire.ContextRequest, *kernel.Refusal) {
		return wire.ContextRequest{}, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: fmt.Sprintf(format, args...)}
	}
	var r wire.ContextRequest
	if err := kernel.DecodeRequest(b, &r); err != nil {
		return bad("compile request: %v", err)
	}
	for _, f := range []struct{ name, v string }{{"run_id", r.RunID}, {"capability_id", r.CapabilityID}} {
		if f.v == "" {
			return bad("%s is required", f.name)
		}
		if len(f.v) > wire.MaxIDBytes {
			return bad("%s is longer than %d bytes", f.name, wire.MaxIDBytes)
		}
	}
	if len(r.EvidenceRefs) > wire.MaxEvidenceRefs {
		return bad("more than %d evidence refs", wire.MaxEvidenceRefs)
	}
	for _, ref := range r.EvidenceRefs {
		if ref == "" || len(ref) > wire.MaxEvidenceRefBytes {
			return bad("evidence refs must be non-empty and at most %d bytes", wire.MaxEvidenceRefBytes)
		}
	}
	return r, nil
}

// compileContext answers an admitted compile request.
func (g *Gateway) compileContext(ctx context.Context, tenant, principal string, body []byte) wire.ContextReply {
	refused := func(r *kernel.Refusal) wire.ContextReply { return wire.ContextRefusal(r.Code, r.Reason) }
	unavailable := func(err error) wire.ContextReply {
		return wire.ContextRefusal(wire.CodeLedgerUnavailable, "the store did not answer: "+err.Error())
	}
	req, r := ParseContextRequest(body)
	if r != nil {
		return refused(r)
	}
	tc, _ := g.cfg.Tenant(tenant)
	agent, ok := tc.Agent(principal)
	if !ok {
		return wire.ContextRefusal(wire.CodeAuthorityDenied, principal+" is not an agent of tenant "+tenant)
	}
	cp, ok := g.cfg.Capability(req.CapabilityID)
	if !ok {
		return wire.ContextRefusal(wire.CodeCapabilityNotSurfaced, "capability "+req.CapabilityID+" is not in the manifest")
	}
	if cp.Pack() == nil {
		return wire.ContextRefusal(wire.CodeContextInvalid, "capability "+cp.ID+" has no context pack")
	}
	held, err := g.heldCapabilities(ctx, tc, principal)
	if err != nil {
		return unavailable(err)
	}
	records := make([]*kernel.EvidenceRecord, 0, len(req.EvidenceRefs))
	for _, name := range req.EvidenceRefs {
		ref, err := evidenceRef(tenant, name)
		if err != nil {
			return wire.ContextRefusal(wire.CodeRequestMalformed, err.Error())
		}
		st, err := g.load(ctx, ref)
		if err != nil {
			return unavailable(err)
		}
		records = append(records, st.(*kernel.EvidenceRecord))
	}
	run := kernel.RunContext{Tenant: tenant, Principal: principal, RunID: req.RunID, DecisionKey: cp.DecisionKey,
		DecisionTime: g.clock.Now(), AllowedSources: agent.EvidenceSources, Capabilities: held}
	cc, b, r := kernel.ServeContext(*cp.Pack(), run, records)
	if r != nil {
		return refused(r)
	}
	return wire.ContextReply{Status: wire.ContextCompiled, Digest: cc.Digest, Context: b}
}

// heldCapabilities lists the capabilities principal holds now: by
// configuration, unless an operator revoked it, or by an operator grant
// (kernel.CheckAuthority, the rule a proposal is decided by), sorted.
func (g *Gateway) heldCapabilities(ctx context.Context, tc *config.TenantConfig, principal string) ([]string, error) {
	ref, err := authorityRef(tc.ID)
	if err != nil {
		return nil, err
	}
	st, err := g.auths.read(ctx, g.store, tc.ID, ref)
	if err != nil {
		return nil, err
	}
	var held []string
	for i := range g.cfg.Capabilities {
		cp := &g.cfg.Capabilities[i]
		if _, r := kernel.CheckAuthority(st, principal, cp.ID, g.authorize(tc, principal, cp) == nil); r == nil {
			held = append(held, cp.ID)
		}
	}
	slices.Sort(held)
	return held, nil
}

// ExposedTools lists the capabilities whose tools principal sees (the MCP
// tools/list): a capability governed by a context pack is listed when the
// derived exposure of that pack, compiled for principal now, exposes it; a
// capability under no pack's tool rules is listed when principal holds it.
// Discovery grants nothing: a call to an unlisted capability is proposed
// and decided as any other.
func (g *Gateway) ExposedTools(ctx context.Context, tenant, principal string) ([]string, error) {
	tc, ok := g.cfg.Tenant(tenant)
	if !ok {
		return nil, fmt.Errorf("unknown tenant %s", tenant)
	}
	agent, ok := tc.Agent(principal)
	if !ok {
		return nil, fmt.Errorf("%s is not an agent of tenant %s", principal, tenant)
	}
	held, err := g.heldCapabilities(ctx, tc, principal)
	if err != nil {
		return nil, err
	}
	exposed, governed := map[string]bool{}, map[string]bool{}
	compiled := map[*kernel.ContextPack]bool{}
	for i := range g.cfg.Capabilities {
		cp := &g.cfg.Capabilities[i]
		pack := cp.Pack()
		if pack == nil || compiled[pack] {
			continue
		}
		compiled[pack] = true
		run := kernel.RunContext{Tenant: tenant, Principal: principal, RunID: "tools/list", DecisionKey: cp.DecisionKey,
			DecisionTime: g.clock.Now(), AllowedSources: agent.EvidenceSources, Capabilities: held}
		cc, _, r := kernel.ServeContext(*pack, run, nil)
		if r != nil {
			return nil, fmt.Errorf("context pack of %s: %s", cp.ID, r.Reason)
		}
		for _, t := range cc.Tools {
			governed[t.CapabilityID] = true
			exposed[t.CapabilityID] = exposed[t.CapabilityID] || t.Exposed
		}
	}
	var out []string
	for _, id := range held {
		if exposed[id] || !governed[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
