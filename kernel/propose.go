package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/contextos/ledger/wire"
)

// The governed step of a proposal: every obligation of DESIGN section 1, in
// one function (ProposeStep), over the subjects it names beforehand
// (ProposeReads), with effects out.

// MaxIDBytes bounds run ids, operation keys, capability ids and approval
// ids in a proposal.
const MaxIDBytes = 256

// Proposal is what an agent publishes on ctx.v1.<tenant>.<principal>.propose.
// Tenant and principal come from the subject, never from the body.
type Proposal struct {
	RunID        string          `json:"run_id"`
	OperationKey string          `json:"operation_key"`
	CapabilityID string          `json:"capability_id"`
	Arguments    json.RawMessage `json:"arguments"`
	EvidenceRefs []string        `json:"evidence_refs,omitempty"`
	ApprovalID   string          `json:"approval_id,omitempty"`
}

// ParseProposal decodes a proposal strictly (DecodeRequest: one JSON
// object, no member twice, exact member names, no unknown fields, no
// trailing data), with arguments an object and ids present and bounded.
// Refusals carry CodeRequestMalformed.
func ParseProposal(b []byte) (Proposal, *Refusal) {
	bad := func(format string, args ...any) (Proposal, *Refusal) {
		return Proposal{}, refuse(wire.CodeRequestMalformed, format, args...)
	}
	var p Proposal
	if err := DecodeRequest(b, &p); err != nil {
		return bad("proposal: %v", err)
	}
	for _, f := range []struct{ name, v string }{{"run_id", p.RunID}, {"operation_key", p.OperationKey}, {"capability_id", p.CapabilityID}} {
		if f.v == "" {
			return bad("%s is required", f.name)
		}
		if len(f.v) > MaxIDBytes {
			return bad("%s is longer than %d bytes", f.name, MaxIDBytes)
		}
	}
	if len(p.Arguments) == 0 || p.Arguments[0] != '{' {
		return bad("arguments must be a JSON object")
	}
	if len(p.EvidenceRefs) > 256 {
		return bad("more than 256 evidence refs")
	}
	for _, r := range p.EvidenceRefs {
		if r == "" || len(r) > 1024 {
			return bad("evidence refs must be non-empty and at most 1024 bytes")
		}
	}
	if len(p.ApprovalID) > MaxIDBytes {
		return bad("approval_id is longer than %d bytes", MaxIDBytes)
	}
	return p, nil
}

// ProposeInput is one proposal as it reaches the runtime, with what the
// runtime supplies: the manifest, the identity from the authenticated
// subject, the decision time and new ids.
type ProposeInput struct {
	Manifest  *Manifest
	Tenant    string
	Principal string
	Body      []byte // the proposal as published
	Now       time.Time
	// OperationID and AttemptID are new ids, used if the proposal opens
	// an operation.
	OperationID string
	AttemptID   string
	Executor    string // the replica that decides and dispatches
	// TraceID is the OpenTelemetry trace id of the proposal's span, if
	// one is active; the decision record carries it.
	TraceID string
	// Witness is the runtime's live view of its witnesses for the
	// tenant's audit log (CheckLogIntegrity).
	Witness WitnessStatus
	// Pack is the context pack version the runtime compiled the evidence
	// gate under; nil: the version the gate resolves from the pack
	// catalog (ResolveGatePack), else the run's pinned version, else (with
	// no catalog read) the gated capability's configured pack.
	Pack *PackRef
	// Scoped decides the proposal on the principal's own subject of its
	// operation key (KeyScopedOperation): a decision on the key's subject
	// of the run found it another principal's (Effects.Scoped).
	Scoped bool
	// Refusals is the runtime's refusal window: a refusal of a tallied
	// code it does not record whole appends nothing and is only counted
	// (Effects.Tally). Nil: every refusal is recorded whole.
	Refusals RefusalWindow
}

// ResolveGatePack is the pack a gated capability's evidence gate is
// compiled under for a run: the version the run pinned when that version
// decides the capability's decision, else the capability's configured pack.
// It returns the pack, its reference, or the refusal of the gate: a pinned
// version the catalog does not hold, or one without the decision.
func ResolveGatePack(cap *Capability, runID string, run *Run, catalog *PackCatalog) (ContextPack, *PackRef, *Refusal) {
	configured := *cap.Pack
	if run == nil || run.Pack == nil {
		d, err := PackDigest(configured)
		if err != nil {
			return configured, nil, nil
		}
		return configured, &PackRef{PackID: configured.PackID, Version: configured.Version, Digest: d}, nil
	}
	v, ok := orNew(catalog).Resolve(run.Pack.Digest)
	if !ok {
		return configured, nil, refuse(wire.CodePackUnknown, "run %s pins pack %s, which the catalog does not hold", runID, run.Pack)
	}
	for _, dec := range v.Pack.Decisions {
		if dec.DecisionKey == cap.DecisionKey {
			return v.Pack, &v.PackRef, nil
		}
	}
	return configured, nil, refuse(wire.CodeEvidenceInsufficient, "run %s pins pack %s, which has no decision %s for %s", runID, v.PackRef, cap.DecisionKey, cap.ID)
}

// ProposeState is what the proposal step reads, each subject by its key.
// A nil state reads as an empty subject.
type ProposeState struct {
	Op        *Operation
	Run       *Run
	Approval  *Approval // the approval the proposal names; nil when it names none
	Control   *Control
	Integrity *LogIntegrity
	Authority *Authority
	Breaker   *Breaker // the capability's, when it declares one
	// Evidence are the records of the references the proposal names, by
	// reference, when its capability is gated.
	Evidence map[string]*EvidenceRecord
	// Ledgers are the ledgers the proposal holds on and those, on the same
	// resources and windows, of the guarantees they replace.
	Ledgers map[LedgerKey]*Ledger
	// Packs is the tenant's pack catalog, which the evidence gate of a
	// gated capability resolves the run's pinned pack in
	// (ResolveGatePack); nil: the gate is compiled under the capability's
	// configured pack.
	Packs *PackCatalog
}

// ProposeReads names what the proposal step reads, before it runs: the
// operation (on the principal's own subject of its key when Scoped), the
// run, the approval it names, the tenant's control and integrity subjects
// (guarded), its authority, the capability's breaker, and for a gated
// capability the evidence it names and the tenant's pack catalog (fresh),
// the ledger of every guarantee that covers the capability (up to one whose
// pin or arguments refuse the proposal) and the ledgers of the guarantees
// those replace (stale reads). A proposal
// refused before it names an operation (too large, malformed, of an unknown
// tenant or capability) reads nothing.
func ProposeReads(in ProposeInput) Reads { return prepare(in).reads }

// ProposeStep decides one proposal, every obligation in this order; the
// first that refuses decides:
//
//  1. the body's bound and its parse, the tenant and the capability surfaced
//     (refused before any operation is opened: nothing is appended; the
//     refusal is Unbound);
//  2. the action digest over the strictly decoded, canonical arguments (an
//     argument refusal is recorded under the digest of the body);
//  3. the operation: the same key with the same action is the same
//     operation (its status again, nothing appended), with another action
//     it is refused and nothing is appended (Unbound); a key another
//     principal's operation holds sends the proposal to the principal's
//     own subject of the key (Effects.Scoped), and is refused there
//     (Unbound) when that one is another principal's too;
//  4. the tenant's kill switch and guardrails (CheckControl, waivers
//     considered) and the audit log's integrity, which take precedence
//     over every refusal below (an operator who engaged the switch sees it
//     as the reason);
//  5. the capability's circuit breaker, the arguments, authority (the
//     configured grant under the operators' changes), policy, the run
//     amount, the evidence gate; then the pin and window of every
//     guarantee that covers the capability;
//  6. the enforcement domain and the exposure carried from replaced
//     guarantees;
//  7. approval redemption, required by the capability's rule (by default
//     when its risk is high);
//  8. the run budget;
//  9. the exposure on every ledger, with the same-action fence when the
//     capability is fenced (SameActionKey).
//
// A refusal from 4 on appends the operation's record only (opened,
// refused, the decision record): nothing is redeemed, consumed or held;
// one of a tallied code that the refusal window does not record whole
// appends nothing (Effects.Tally). An
// accepted proposal opens the operation, redeems its approval, charges its
// run and reserves with the dispatch-start on every ledger in one append,
// and asks for the Dispatch.
func ProposeStep(s ProposeState, in ProposeInput) Effects { return prepare(in).decide(s) }

// Step returns the proposal step as a runtime drives it.
func (in ProposeInput) Step() Step { return prepare(in) }

// proposal is a proposal prepared once for its reads and its decisions:
// what needs no subject is computed here, and applied in ProposeStep's
// order by decide.
type proposal struct {
	in      ProposeInput
	unbound *Refusal // refused before an operation: step 1
	wire    Proposal
	tenant  *Tenant
	cap     *Capability
	agent   *Agent // nil when the principal is no agent of the tenant
	// The action (step 2): the decoded arguments, the bytes the digest
	// binds (the body's arguments when they are refused) and the digest.
	args       map[string]any
	canon      json.RawMessage
	digest     string
	argRefusal *Refusal
	// The holds of every guarantee that covers the capability, up to the
	// first whose pin or arguments refuse (holdRefusal).
	holds       []Hold
	holdRefusal *Refusal
	reads       Reads
	context     *CompiledContext // the evidence gate's compiled context, once checked
	pack        *PackRef         // the pack the gate was compiled under, when resolved from the catalog
}

// opKey is the key of the proposal's operation.
func (p *proposal) opKey() Key {
	if p.in.Scoped {
		return KeyScopedOperation(p.wire.RunID, p.wire.OperationKey, p.in.Principal)
	}
	return KeyOperation(p.wire.RunID, p.wire.OperationKey)
}

func prepare(in ProposeInput) *proposal {
	p := &proposal{in: in}
	m := in.Manifest
	if m.MaxProposalBytes > 0 && len(in.Body) > m.MaxProposalBytes {
		p.unbound = refuse(wire.CodeRequestMalformed, "proposal of %d bytes exceeds %d", len(in.Body), m.MaxProposalBytes)
		return p
	}
	if p.wire, p.unbound = ParseProposal(in.Body); p.unbound != nil {
		return p
	}
	var ok bool
	if p.tenant, ok = m.Tenant(in.Tenant); !ok {
		p.unbound = refuse(wire.CodeAuthorityDenied, "unknown tenant")
		return p
	}
	if p.cap, ok = m.Capability(p.wire.CapabilityID); !ok {
		// Refused before any operation is opened: the refusal is sampled
		// like a malformed proposal's, so unsurfaced names cannot grow the
		// store one operation each.
		p.unbound = refuse(wire.CodeCapabilityNotSurfaced, "capability %q is not in the pinned manifest", clipID(p.wire.CapabilityID))
		return p
	}
	p.agent = p.tenant.Agents[in.Principal]
	p.bindAction()
	if p.argRefusal == nil {
		p.bindHolds()
	}
	p.reads = p.readsOf()
	return p
}

// bindAction binds the proposal's action (BindAction). Refused arguments
// are recorded under the digest of the whole body.
func (p *proposal) bindAction() {
	act, r := BindAction(p.in.Tenant, p.in.Principal, p.wire, p.cap, p.in.Manifest.amountPointers(p.wire.CapabilityID)...)
	if r != nil {
		sum := sha256.Sum256(p.in.Body)
		p.argRefusal, p.canon, p.digest = r, json.RawMessage(p.wire.Arguments), "body:"+hex.EncodeToString(sum[:])
		return
	}
	p.args, p.canon, p.digest = act.Args, act.Canonical, act.Digest
}

// Action is a proposal's tool call as it is bound: its decoded arguments,
// their canonical bytes (exactly what the provider receives) and the
// digest of the binding over those bytes (what an approval names and a
// reply reports).
type Action struct {
	Args      map[string]any
	Canonical json.RawMessage
	Digest    string
}

// BindAction decodes a proposal's arguments strictly (an inexact number at
// one of amountPointers is an invalid amount) and binds them for principal
// of tenant under the capability's version and policy. Any failure refuses
// the proposal: a digest is never left empty nor made over other bytes than
// the provider's.
func BindAction(tenant, principal string, w Proposal, cap *Capability, amountPointers ...Pointer) (Action, *Refusal) {
	args, r := DecodeArguments(w.Arguments, amountPointers...)
	if r != nil {
		return Action{}, r
	}
	canon, err := Canonical(json.RawMessage(w.Arguments))
	if err != nil {
		return Action{}, refuse(wire.CodeRequestMalformed, "arguments cannot be canonicalized: %v", err)
	}
	digest, err := ActionDigest(ActionBinding{Tenant: tenant, Principal: principal, RunID: w.RunID, CapabilityID: w.CapabilityID,
		CapabilityVersion: cap.Version, Arguments: canon, EvidenceRefs: w.EvidenceRefs, PolicyDigest: cap.CompiledPolicy().Digest()})
	if err != nil {
		return Action{}, refuse(wire.CodeRequestMalformed, "the action cannot be digested: %v", err)
	}
	return Action{Args: args, Canonical: canon, Digest: digest}, nil
}

// bindHolds extracts, for every guarantee that covers the capability in
// configuration order, the resource and amount its pinned definition reads
// and the window the decision time falls in, up to the first guarantee
// whose pin or arguments refuse.
func (p *proposal) bindHolds() {
	for _, g := range p.in.Manifest.GuaranteesFor(p.cap.ID) {
		pin, r := p.tenant.pinned(g.Definition.ID)
		if r != nil {
			p.holdRefusal = r
			return
		}
		res, amt, r := g.Definition.Extract(p.args)
		if r != nil {
			p.holdRefusal = r
			return
		}
		h := pin.Pin.PinnedHold(res, amt)
		if d := pin.Pin.Definition; d.Calendar() {
			zone := g.Zone
			if zone == nil {
				zone = time.UTC
			}
			h.Window = d.WindowAt(zone, p.in.Now).Key
		}
		p.holds = append(p.holds, h)
	}
}

// readsOf names the subjects the step reads.
func (p *proposal) readsOf() Reads {
	w := p.wire
	var r Reads
	r.add(p.opKey(), Write)
	for _, h := range p.holds {
		r.add(h.ledgerKey().Key(), Write)
	}
	r.add(KeyRun(w.RunID), Write)
	if w.ApprovalID != "" {
		r.add(KeyApproval(w.ApprovalID), Write)
	}
	r.add(KeyControl, Guard)
	for _, h := range p.holds {
		for _, id := range p.tenant.Pins[h.GuaranteeID].Replaced {
			r.add(LedgerKey{GuaranteeID: id, Resource: h.Resource, Window: h.Window}.Key(), Stale)
		}
	}
	r.add(KeyIntegrity, Guard)
	if p.agent != nil {
		r.add(KeyAuthority, Fresh)
	}
	if p.cap.Breaker.Threshold > 0 {
		r.add(KeyBreaker(p.cap.ID), Fresh)
	}
	if p.cap.Pack != nil {
		for _, ref := range w.EvidenceRefs {
			r.add(KeyEvidence(ref), Fresh)
		}
		r.add(KeyPacks, Fresh)
	}
	return r
}

func (h Hold) ledgerKey() LedgerKey {
	return LedgerKey{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Window: h.Window}
}

// Reads implements Step.
func (p *proposal) Reads() Reads { return p.reads }

// Decide implements Step.
func (p *proposal) Decide(l Loaded) Effects {
	if p.unbound != nil {
		return p.decide(ProposeState{})
	}
	w := p.wire
	s := ProposeState{Op: loaded[Operation](l, p.opKey()), Run: loaded[Run](l, KeyRun(w.RunID)),
		Control: loaded[Control](l, KeyControl), Integrity: loaded[LogIntegrity](l, KeyIntegrity),
		Authority: loaded[Authority](l, KeyAuthority), Breaker: loaded[Breaker](l, KeyBreaker(p.cap.ID))}
	if w.ApprovalID != "" {
		s.Approval = loaded[Approval](l, KeyApproval(w.ApprovalID))
	}
	if p.cap.Pack != nil {
		s.Packs = loaded[PackCatalog](l, KeyPacks)
	}
	for _, r := range p.reads {
		switch r.Key.Kind {
		case KindLedger:
			if s.Ledgers == nil {
				s.Ledgers = map[LedgerKey]*Ledger{}
			}
			s.Ledgers[r.Key.Ledger()] = loaded[Ledger](l, r.Key)
		case KindEvidence:
			if s.Evidence == nil {
				s.Evidence = map[string]*EvidenceRecord{}
			}
			s.Evidence[r.Key.ID] = loaded[EvidenceRecord](l, r.Key)
		}
	}
	return p.decide(s)
}

// Contended implements Step: a proposal the runtime gave up deciding after
// conflicts opened nothing, and is recorded as such.
func (p *proposal) Contended(r *Refusal) Effects { return p.refuseUnbound(r, p.canon) }

// refuseUnbound is a refusal no operation records: its record goes to the
// principal's refusal subject, with the digest of what was refused.
func (p *proposal) refuseUnbound(r *Refusal, body []byte) Effects {
	sum := sha256.Sum256(body)
	return Effects{Refusal: r, Reply: refusedReply(r), Unbound: &ProposalRefused{Principal: p.in.Principal, Code: r.Code, Reason: r.Reason,
		BodyDigest: hex.EncodeToString(sum[:]), BodyBytes: len(body)}}
}

// decide is ProposeStep.
func (p *proposal) decide(s ProposeState) Effects {
	in, w := p.in, p.wire
	// 1. Bound, parse, tenant, capability surfaced.
	if p.unbound != nil {
		return p.refuseUnbound(p.unbound, in.Body)
	}
	op, run, ctl := orNew(s.Op), orNew(s.Run), s.Control
	s.Ledgers = p.named(s.Ledgers)
	opKey := p.opKey()
	// The checks of step 5 run first (they change nothing), so that the
	// operation records the pack version the gate resolved; their refusal
	// still ranks after those of steps 3 and 4.
	c := p.check(s)

	// 2. The action digest: bound when the proposal was prepared (over
	// the canonical arguments, or the body when they are refused).

	// 3. The operation.
	opened := OperationOpened{OperationID: in.OperationID, Principal: in.Principal, RunID: w.RunID, OperationKey: w.OperationKey,
		CapabilityID: w.CapabilityID, ActionDigest: p.digest, Executor: in.Executor}
	if in.Pack == nil {
		in.Pack = c.pack
	}
	if in.Pack == nil && s.Packs == nil {
		in.Pack = manifestPack(p.cap.Pack)
	}
	opened.Pack = pinOf(in.Pack, run)
	kind, open := DecideOpen(op, opened)
	if open.Refusal != nil {
		return p.refuseUnbound(open.Refusal, p.canon)
	}
	if kind == OpenScoped {
		if in.Scoped {
			return p.refuseUnbound(KeyHeldByAnother(w.RunID, w.OperationKey), p.canon)
		}
		// The principal's operation with this key is on its own subject
		// of the key, which this step does not read.
		return Effects{Scoped: true}
	}
	if kind == OpenExisting {
		return Effects{Reply: ledgerSealed(statusOf(op, HoldsOf(c.holds, s.Ledgers)), op, s.Ledgers)}
	}
	var eff Effects
	eff.put(opKey, open.Events...)
	runBudget := run.Describe()

	// 4. The kill switch and the guardrails, and the log's integrity.
	runAmount, _ := p.runAmount()
	refusal := CheckControl(ctl, Guarded{CapabilityID: w.CapabilityID, RunID: w.RunID, Holds: p.holds, RunAmount: runAmount, Now: in.Now})
	if refusal == nil {
		refusal = CheckLogIntegrity(s.Integrity, in.Witness)
	}

	// 5. The capability's controls, then the pins and windows.
	if refusal == nil {
		refusal = c.refusal
	}
	controls, holds := c.controls, c.holds
	controls.Trace = TraceOf(TraceInput{Context: p.context, EvidenceRefs: w.EvidenceRefs, Arguments: p.canon,
		ManifestDigest: p.in.Manifest.Digest, TraceID: in.TraceID})

	// 6. The enforcement domain; each hold under the latest version of its
	// guarantee, with the exposure the guarantees it replaces carry.
	if refusal == nil {
		refusal = ctl.checkHolds(w.CapabilityID, holds)
	}
	bound := make([]Hold, len(holds))
	for i, h := range holds {
		h = ctl.Bind(h)
		carried, r := ctl.carried(h, s.Ledgers, in.Now)
		if r != nil && refusal == nil {
			refusal = r
		}
		h.Carried = carried
		bound[i] = h
	}
	if len(bound) == 0 {
		bound = nil
	}

	// 7. Approval redemption.
	if refusal == nil {
		ap := DecideApproval(s.Approval, RedeemApproval{Required: p.cap.ApprovalRequiredBy(), ApprovalID: w.ApprovalID,
			ActionDigest: p.digest, Risk: p.cap.Risk, OperationID: in.OperationID, Now: in.Now})
		refusal = ap.Refusal
		if refusal == nil && w.ApprovalID != "" {
			eff.put(KeyApproval(w.ApprovalID), ap.Events...)
		}
	}

	// 8. The run budget.
	if refusal == nil {
		rd := DecideConsume(run, ConsumeRun{RunID: w.RunID, Principal: in.Principal, OperationID: in.OperationID, AttemptID: in.AttemptID,
			Amount: c.runAmount, AllowUnadmitted: p.tenant.AllowUnadmitted})
		refusal = rd.Refusal
		if refusal == nil {
			eff.put(KeyRun(w.RunID), rd.Events...)
			after := *run
			for _, ev := range rd.Events {
				if after.Apply(ev) == nil {
					runBudget = after.Describe()
				}
			}
		}
	}

	// 9. The exposure on every ledger, fenced against an unresolved
	// attempt of the same action.
	var action string
	if refusal == nil && p.cap.SameActionFenced() && len(bound) > 0 {
		action, refusal = sameAction(w.CapabilityID, p.canon)
	}
	if refusal == nil {
		for _, h := range bound {
			k := h.ledgerKey()
			rd := DecideExposure(orNew(s.Ledgers[k]), ReserveStarted{Reserve: Reserve{GuaranteeID: h.GuaranteeID, Resource: h.Resource,
				AttemptID: in.AttemptID, OperationID: in.OperationID, Amount: h.Amount, Limit: h.Limit, DefinitionDigest: h.DefinitionDigest,
				Observe: h.Observe, Window: h.Window, Rolling: h.Rolling, Now: in.Now, Carried: h.Carried, Action: action}})
			if rd.Refusal != nil {
				refusal = rd.Refusal
				break
			}
			eff.put(k.Key(), rd.Events...)
		}
	}

	// The record.
	if controls.Authority == "" {
		controls.Authority = "none"
	}
	controls.RunBudget, controls.Guarantees, controls.Generation = runBudget, HoldsOf(bound, s.Ledgers), 1
	if refusal != nil {
		rec := decisionRecord(OperationOpened{OperationID: in.OperationID, Principal: in.Principal, RunID: w.RunID, CapabilityID: w.CapabilityID,
			ActionDigest: p.digest, Pack: opened.Pack}, "", wire.StatusRefused, refusal.Code, refusal.Reason, controls)
		refused := OperationRefused{Code: refusal.Code, Reason: refusal.Reason}
		if refusal.Code == wire.CodeApprovalRequired {
			refused.Arguments = p.canon // what an operator is asked to approve
		}
		eff = Effects{Refusal: refusal, Tally: p.tally(refusal)}
		if eff.Tally != nil && !eff.Tally.Whole {
			// Counted into the window's aggregate: nothing is appended.
			eff.Reply = Reply{Status: wire.StatusRefused, Code: refusal.Code, Reason: refusal.Reason, ActionDigest: p.digest,
				Guarantees: HoldsOf(bound, s.Ledgers), Gate: controls.EvidenceGate}
			return eff
		}
		eff.put(opKey, append(open.Events, refused, rec)...)
		eff.Reply = statusOf(foldNew[Operation](eff.Append[opKey]), HoldsOf(bound, s.Ledgers))
		eff.Reply.Gate = controls.EvidenceGate
		return eff
	}
	refs := make([]HoldRef, len(bound))
	for i, h := range bound {
		refs[i] = HoldRef{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount, Window: h.Window}
	}
	if len(refs) == 0 {
		refs = nil
	}
	eff.put(opKey, OperationReserved{AttemptID: in.AttemptID, Generation: 1, Holds: refs},
		OperationDispatchStarted{AttemptID: in.AttemptID, Generation: 1})
	eff.Reply = statusOf(foldNew[Operation](eff.Append[opKey]), HoldsOf(bound, reserved(s.Ledgers, bound, in.Now)))
	eff.Reply.Gate = controls.EvidenceGate
	eff.Dispatch = &Dispatch{Operation: opKey, OperationID: in.OperationID, AttemptID: in.AttemptID, Generation: 1, CapabilityID: w.CapabilityID,
		Arguments: p.canon, Holds: bound, Controls: controls, Gate: controls.EvidenceGate}
	return eff
}

// tally is how the refusal window counts a refusal recorded on the
// proposal's operation, keyed over configured names only; nil when its code
// is not tallied or the runtime keeps no window.
func (p *proposal) tally(r *Refusal) *TalliedRefusal {
	if p.in.Refusals == nil || !Tallied(r.Code) {
		return nil
	}
	k := RefusalKey{Code: r.Code, CapabilityID: p.cap.ID}
	if p.agent != nil {
		k.Principal = p.in.Principal
	}
	sum := sha256.Sum256(p.canon)
	return &TalliedRefusal{Key: k, Whole: p.in.Refusals.Whole(k), Refused: ProposalRefused{Principal: p.in.Principal, Code: r.Code, Reason: r.Reason,
		BodyDigest: hex.EncodeToString(sum[:]), BodyBytes: len(p.canon)}}
}

// named returns the ledgers of ledgers that the step's reads name: the
// step decides on what it read, never on a ledger it did not name (a
// replaced guarantee's this runtime does not know of is refused, not
// counted).
func (p *proposal) named(ledgers map[LedgerKey]*Ledger) map[LedgerKey]*Ledger {
	out := make(map[LedgerKey]*Ledger, len(ledgers))
	for _, r := range p.reads {
		if r.Key.Kind == KindLedger {
			if l := ledgers[r.Key.Ledger()]; l != nil {
				out[r.Key.Ledger()] = l
			}
		}
	}
	return out
}

// Prepared is a proposal prepared for its step: bound, parsed and its
// action digested once.
type Prepared struct{ p *proposal }

// PrepareProposal runs steps 1 and 2 of ProposeStep.
func PrepareProposal(in ProposeInput) Prepared { return Prepared{prepare(in)} }

// Unbound is the refusal of step 1, if any: nothing else is known then.
func (pp Prepared) Unbound() *Refusal { return pp.p.unbound }

// Proposal is the parsed proposal.
func (pp Prepared) Proposal() Proposal { return pp.p.wire }

// Digest is the action digest of the proposal ("" when it is Unbound).
func (pp Prepared) Digest() string { return pp.p.digest }

// Step is the prepared proposal's step, as ProposeInput.Step returns it.
func (pp Prepared) Step() Step { return pp.p }

// checked is what the checks of step 5 found.
type checked struct {
	refusal   *Refusal
	controls  Controls // the controls of the decision as far as they know them
	holds     []Hold   // the holds bound when nothing refused before the pins
	runAmount int64
	pack      *PackRef // the pack the gate was compiled under, when resolved from the catalog
}

// check runs step 5: the capability's breaker, the arguments, its
// controls (checkControls), then the pins and windows of its guarantees.
func (p *proposal) check(s ProposeState) checked {
	p.context, p.pack = nil, nil // of this decision only: a step may be decided again
	c := checked{controls: Controls{ApprovalID: p.wire.ApprovalID, Executor: p.in.Executor, CapabilityVersion: p.cap.Version, Risk: p.cap.Risk,
		PolicyDigest: p.cap.CompiledPolicy().Digest()}}
	switch {
	case p.cap.Breaker.Threshold > 0 && s.Breaker != nil && s.Breaker.Open:
		c.refusal = breakerRefusal(p.cap.ID, s.Breaker.Trip)
	case p.argRefusal != nil:
		c.refusal = p.argRefusal
	default:
		c.refusal, c.runAmount = p.checkControls(s, &c.controls)
	}
	if c.refusal == nil {
		c.holds, c.refusal = p.holds, p.holdRefusal
	}
	c.pack = p.pack
	return c
}

// checkControls runs the checks of the capability's controls, in order:
// authority, policy, the run amount, the evidence gate. It records the
// source of the authority and the gate in the controls, and returns the
// amount the proposal consumes from its run.
func (p *proposal) checkControls(s ProposeState, controls *Controls) (*Refusal, int64) {
	w := p.wire
	if p.agent == nil {
		return refuse(wire.CodeAuthorityDenied, "%s is not an agent of tenant %s", p.in.Principal, p.tenant.ID), 0
	}
	src, r := CheckAuthority(s.Authority, p.in.Principal, p.cap.ID, p.agent.Grants(p.cap.ID))
	controls.Authority = src
	if r != nil {
		return r, 0
	}
	if r := p.cap.CompiledPolicy().Evaluate(p.args); r != nil {
		return r, 0
	}
	amount, r := p.runAmount()
	if r != nil {
		return r, 0
	}
	if p.cap.Pack == nil {
		return nil, amount
	}
	records := make([]*EvidenceRecord, 0, len(w.EvidenceRefs))
	for _, ref := range w.EvidenceRefs {
		records = append(records, orNew(s.Evidence[ref]))
	}
	pack := *p.cap.Pack
	if s.Packs != nil {
		var r *Refusal
		if pack, p.pack, r = ResolveGatePack(p.cap, w.RunID, s.Run, s.Packs); r != nil {
			return r, 0
		}
	}
	run := RunContext{Tenant: p.in.Tenant, Principal: p.in.Principal, RunID: w.RunID, DecisionKey: p.cap.DecisionKey,
		DecisionTime: p.in.Now, AllowedSources: p.agent.EvidenceSources, Capabilities: []string{p.cap.ID}}
	cc, r := CheckEvidenceContext(pack, run, records)
	if cc != nil {
		p.context = cc
		if b, err := json.Marshal(cc.Gate); err == nil {
			controls.EvidenceGate = b
		}
	}
	return r, amount
}

// runAmount is what the proposal consumes from its run's amount budget:
// the exact positive integer at the capability's run amount pointer, or 0
// when it declares none.
func (p *proposal) runAmount() (int64, *Refusal) {
	ptr := p.cap.RunAmount
	if ptr == "" {
		return 0, nil
	}
	pp, err := ParsePointer(ptr)
	if err != nil {
		return 0, refuse(wire.CodeRequestMalformed, "%s", err.Error())
	}
	v, _ := pp.Eval(p.args)
	amt, r := ParseAmount(v)
	if r != nil {
		return 0, refuse(wire.CodeRequestMalformed, "the run budget reads the amount at %s: %s", ptr, r.Reason)
	}
	return amt, nil
}

// breakerRefusal is the refusal of a proposal while its capability's
// breaker is open.
func breakerRefusal(capabilityID string, trip *BreakerTripped) *Refusal {
	if trip == nil {
		return refuse(wire.CodeBreakerOpen, "the circuit breaker of %s is open; an operator resets it with ctx breaker reset", capabilityID)
	}
	return refuse(wire.CodeBreakerOpen, "the circuit breaker of %s tripped at %s after %d provider failures within %s (last: %s); an operator resets it with ctx breaker reset",
		capabilityID, trip.LastFailure, trip.Failures, time.Duration(trip.WindowMillis)*time.Millisecond, trip.LastReason)
}

// HoldsOf describes holds with the balances of their ledgers, under each
// hold's limit; a ledger that holds nothing yet shows the guarantee's whole
// limit available.
func HoldsOf(holds []Hold, ledgers map[LedgerKey]*Ledger) []GuaranteeHold {
	var out []GuaranteeHold
	for _, h := range holds {
		bal := orNew(ledgers[h.ledgerKey()]).BalanceUnder(h.Limit)
		bal.Carried = h.Carried
		bal.Available -= h.Carried
		out = append(out, GuaranteeHold{GuaranteeID: h.GuaranteeID, DefinitionDigest: h.DefinitionDigest, Resource: h.Resource, Amount: h.Amount, Balance: bal})
	}
	return out
}

// reserved returns the ledgers' balances once every hold is reserved at
// now, without copying a ledger's receipts (a hot ledger lists a thousand):
// each held ledger's committed amount as the reservation counts it (what a
// rolling window still holds at now) and its held amount with the hold's.
func reserved(ledgers map[LedgerKey]*Ledger, holds []Hold, now time.Time) map[LedgerKey]*Ledger {
	out := make(map[LedgerKey]*Ledger, len(ledgers))
	for k, l := range ledgers {
		out[k] = l
	}
	for _, h := range holds {
		l := orNew(ledgers[h.ledgerKey()])
		out[h.ledgerKey()] = &Ledger{Committed: l.CommittedAt(now), Held: l.Held + h.Amount}
	}
	return out
}

// previewLedgers returns the ledgers as they are once the effects' events
// apply, each changed one folded on a copy.
func previewLedgers(ledgers map[LedgerKey]*Ledger, eff Effects) map[LedgerKey]*Ledger {
	out := make(map[LedgerKey]*Ledger, len(ledgers))
	for k, l := range ledgers {
		out[k] = l
	}
	for k, evs := range eff.Append {
		if k.Kind != KindLedger || len(evs) == 0 {
			continue
		}
		l := orNew(ledgers[k.Ledger()]).Clone()
		for _, ev := range evs {
			if err := l.Apply(ev); err != nil {
				l = orNew(ledgers[k.Ledger()])
				break
			}
		}
		out[k.Ledger()] = l
	}
	return out
}

// orNew returns v, or a new empty T when v is nil.
func orNew[T any](v *T) *T {
	if v == nil {
		return new(T)
	}
	return v
}

// foldNew folds events into a new state.
func foldNew[T any, PT interface {
	*T
	Aggregate
}](evs []Event) PT {
	st := PT(new(T))
	for _, ev := range evs {
		_ = st.Apply(ev)
	}
	return st
}

// KeyHeldByAnother refuses a proposal whose operation key, in its run and
// on the principal's own subject of the key as well, is another
// principal's.
func KeyHeldByAnother(runID, operationKey string) *Refusal {
	return refuse(wire.CodeOperationConflict, "operation key %q of run %q is held by another principal", clipID(operationKey), clipID(runID))
}

// RefuseMalformed refuses a proposal whose ids name no valid subject.
func RefuseMalformed(err error) *Refusal { return refuse(wire.CodeRequestMalformed, "%s", err.Error()) }

// RefuseResource refuses a proposal whose resource names no valid
// subject.
func RefuseResource(err error) *Refusal { return refuse(wire.CodeResourceInvalid, "%s", err.Error()) }

// clipID shortens an agent-chosen id for a reason.
func clipID(s string) string {
	for i := range s {
		if i >= 64 {
			return s[:i] + "..."
		}
	}
	return s
}
