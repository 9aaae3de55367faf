package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

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
// The run's context is compiled under the pack version the run pinned at
// admission when that version holds the capability's decision, else the
// capability's configured pack (gatePack, the rule a proposal is gated
// by), from the evidence refs the request names, the agent's evidence
// sources, the capabilities it holds now (configuration and operator
// grants, kernel.CheckAuthority), and the typed inputs of the loaded
// configuration (runInputs).

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
	r := g.admission(caller{tenant: tenant, principal: principal, kind: kernel.AdmitCompile}, len(body), func(oversized *kernel.Refusal) {
		if oversized != nil {
			answer(wire.ContextRefusal(oversized.Code, oversized.Reason))
			return
		}
		answer(g.compileContext(ctx, tenant, principal, body))
	})
	if r != nil {
		answer(wire.ContextRefusal(r.Code, r.Reason))
	}
}

// compileContext answers an admitted compile request.
func (g *Gateway) compileContext(ctx context.Context, tenant, principal string, body []byte) wire.ContextReply {
	refused := func(r *kernel.Refusal) wire.ContextReply { return wire.ContextRefusal(r.Code, r.Reason) }
	unavailable := func(err error) wire.ContextReply { return wire.ContextRefusal(storeFault(err)) }
	req, r := kernel.ParseContextRequest(body)
	if r != nil {
		return refused(r)
	}
	tc, _ := g.cfg.Tenant(tenant)
	agent, isAgent := tc.Agent(principal)
	cp, surfaced := g.cfg.Capability(req.CapabilityID)
	if r := kernel.AuthorizeCompile(kernel.CompileAccess{Tenant: tenant, Principal: principal, CapabilityID: req.CapabilityID,
		Agent: isAgent, Surfaced: surfaced, HasPack: surfaced && cp.Pack() != nil}); r != nil {
		return refused(r)
	}
	held, err := g.heldCapabilities(ctx, tc, principal)
	if err != nil {
		return unavailable(err)
	}
	records := make([]*kernel.EvidenceRecord, 0, len(req.EvidenceRefs))
	for _, name := range req.EvidenceRefs {
		ref, err := evidenceRef(tenant, name)
		if err != nil {
			return refused(kernel.RefuseMalformed(err))
		}
		st, err := g.load(ctx, ref)
		if err != nil {
			return unavailable(err)
		}
		records = append(records, st.(*kernel.EvidenceRecord))
	}
	pack, _, r, err := g.gatePack(ctx, tenant, req.RunID, cp)
	if err != nil {
		return unavailable(err)
	}
	if r != nil {
		return refused(r)
	}
	run := kernel.RunContext{Tenant: tenant, Principal: principal, RunID: req.RunID, DecisionKey: cp.DecisionKey,
		DecisionTime: g.clock.Now(), AllowedSources: agent.EvidenceSources, Capabilities: held}
	cc, b, r := kernel.ServeContextWith(pack, run, records, g.runInputs(tenant))
	if r != nil {
		return refused(r)
	}
	return wire.ContextReply{Status: wire.ContextCompiled, Digest: cc.Digest, Context: b}
}

// The refs and source of the typed inputs the configuration gives. The
// '#' keeps them apart from evidence refs an operator would name.
const (
	PolicyInputRef       = "config#policy"
	ToolRegistryInputRef = "config#tool_registry"
	ConfigInputSource    = "contextosd.config"
)

// configValidUntil is the valid_until of the configuration's snapshots:
// the daemon loads its configuration once and serves it until it stops,
// so they have no expiry of their own (the latest time the compiler
// accepts).
var configValidUntil = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// runInputs are the typed inputs the daemon feeds the compiler for a run
// of tenant: the policy snapshot (the capabilities the configuration's
// manifest permits to dispatch) and the tool registry snapshot (the
// manifest's capabilities and their versions), both versioned by the
// configuration's digest (the manifest_digest every decision record
// names) and observed when the configuration was loaded. Promoted memory
// and durable session state have no source in the daemon yet: those
// inputs are absent, and a compilation without them is what it was before
// they existed.
func (g *Gateway) runInputs(tenant string) kernel.ContextInputs {
	prov := func(ref string) kernel.Provenance {
		return kernel.Provenance{Ref: ref, Source: ConfigInputSource, Version: g.cfg.Digest, Tenant: tenant,
			ObservedAt: g.loadedAt, ValidUntil: configValidUntil}
	}
	pol := &kernel.PolicySnapshot{Provenance: prov(PolicyInputRef), Capabilities: []string{}}
	reg := &kernel.ToolRegistrySnapshot{Provenance: prov(ToolRegistryInputRef), Tools: []kernel.RegisteredTool{}}
	for i := range g.cfg.Capabilities {
		cp := &g.cfg.Capabilities[i]
		pol.Capabilities = append(pol.Capabilities, cp.ID)
		reg.Tools = append(reg.Tools, kernel.RegisteredTool{CapabilityID: cp.ID, Version: cp.Version})
	}
	return kernel.ContextInputs{Policy: pol, ToolRegistry: reg}
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
		if _, r := kernel.CheckAuthority(st, principal, cp.ID, configuredGrant(tc, principal, cp)); r == nil {
			held = append(held, cp.ID)
		}
	}
	slices.Sort(held)
	return held, nil
}

// ExposedTools lists the capabilities whose tools principal sees in run
// (the MCP tools/list), sorted: the derived tool exposure of the run's
// packs, compiled for principal now with the configuration's typed inputs
// (runInputs). The run's packs are the version it pinned at admission, or,
// for a run that pins none and when runID is "" (no run named), every
// configured pack. A capability some configured or pinned pack names in
// its tools is listed when one of the run's packs exposes it; a capability
// no pack names is listed when principal holds it. Discovery grants
// nothing: a call to an unlisted capability is proposed and decided as any
// other.
func (g *Gateway) ExposedTools(ctx context.Context, tenant, principal, runID string) ([]string, error) {
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
	governed := map[string]bool{}
	var packs []*kernel.ContextPack
	for i := range g.cfg.Capabilities {
		if p := g.cfg.Capabilities[i].Pack(); p != nil && !slices.Contains(packs, p) {
			packs = append(packs, p)
			for _, t := range p.Tools {
				governed[t.CapabilityID] = true
			}
		}
	}
	if runID != "" {
		pinned, err := g.runPack(ctx, tenant, principal, runID)
		if err != nil {
			return nil, err
		}
		if pinned != nil {
			packs = []*kernel.ContextPack{pinned}
			for _, t := range pinned.Tools {
				governed[t.CapabilityID] = true
			}
		}
	}
	if runID == "" {
		runID = "tools/list"
	}
	inputs := g.runInputs(tenant)
	exposed := map[string]bool{}
	for _, pack := range packs {
		if len(pack.Decisions) == 0 {
			continue
		}
		run := kernel.RunContext{Tenant: tenant, Principal: principal, RunID: runID, DecisionKey: pack.Decisions[0].DecisionKey,
			DecisionTime: g.clock.Now(), AllowedSources: agent.EvidenceSources, Capabilities: held}
		cc, _, r := kernel.ServeContextWith(*pack, run, nil, inputs)
		if r != nil {
			return nil, fmt.Errorf("context pack %s@%s: %s", pack.PackID, pack.Version, r.Reason)
		}
		for _, t := range cc.Tools {
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

// runPack is the pack version run pinned at admission (nil when it pins
// none). A run admitted for another principal, or whose pinned version the
// catalog does not hold, is an error: its list is not principal's to see.
func (g *Gateway) runPack(ctx context.Context, tenant, principal, runID string) (*kernel.ContextPack, error) {
	if len(runID) > wire.MaxIDBytes {
		return nil, fmt.Errorf("run id is longer than %d bytes", wire.MaxIDBytes)
	}
	ref, err := RunRef(tenant, runID)
	if err != nil {
		return nil, err
	}
	st, err := g.load(ctx, ref)
	if err != nil {
		return nil, err
	}
	run := st.(*kernel.Run)
	if run.Admitted && run.Principal != principal {
		return nil, fmt.Errorf("run %s is admitted for another principal", clipID(runID))
	}
	if run.Pack == nil {
		return nil, nil
	}
	cat, err := g.loadPacks(ctx, tenant)
	if err != nil {
		return nil, err
	}
	v, ok := cat.Resolve(run.Pack.Digest)
	if !ok {
		return nil, fmt.Errorf("run %s pins pack %s, which the catalog does not hold", clipID(runID), run.Pack)
	}
	return &v.Pack, nil
}
