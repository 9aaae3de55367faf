package kernel

import "github.com/contextos/ledger/wire"

// ParseContextRequest decodes a compile request strictly (DecodeRequest),
// with ids present and bounded like a proposal's.
func ParseContextRequest(b []byte) (wire.ContextRequest, *Refusal) {
	bad := func(format string, args ...any) (wire.ContextRequest, *Refusal) {
		return wire.ContextRequest{}, refuse(wire.CodeRequestMalformed, format, args...)
	}
	var r wire.ContextRequest
	if err := DecodeRequest(b, &r); err != nil {
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

// CompileAccess is what a compile request's authorization reads: whether
// the principal is one of the tenant's agents, and whether the capability
// it names is in the manifest and has a context pack.
type CompileAccess struct {
	Tenant, Principal, CapabilityID string
	Agent, Surfaced, HasPack        bool
}

// AuthorizeCompile refuses a compile request its principal may not make or
// whose capability has no context to compile, in this order: an agent of
// the tenant (authority_denied), a capability in the manifest
// (capability_not_surfaced), a capability with a context pack
// (context_invalid). The capabilities the agent holds decide what the
// compiled context exposes, not whether it is compiled.
func AuthorizeCompile(a CompileAccess) *Refusal {
	switch {
	case !a.Agent:
		return refuse(wire.CodeAuthorityDenied, "%s is not an agent of tenant %s", a.Principal, a.Tenant)
	case !a.Surfaced:
		return refuse(wire.CodeCapabilityNotSurfaced, "capability %s is not in the manifest", a.CapabilityID)
	case !a.HasPack:
		return refuse(wire.CodeContextInvalid, "capability %s has no context pack", a.CapabilityID)
	}
	return nil
}
