package kernel

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/contextos/ledger/wire"
)

// The steps on an attempt after its reservation: settle it with a report
// (the provider's, or reconciliation's), release it (an operator closes it
// unstarted, or asserts the absence of its effect), each over the attempt's
// operation and the ledgers it holds on, with effects out.

// AttemptState is what a step on an attempt reads: its operation and the
// ledger of every guarantee it holds on. A nil state reads as an empty
// subject.
type AttemptState struct {
	Op      *Operation
	Ledgers map[LedgerKey]*Ledger
}

// SettleInput is a report on an attempt.
type SettleInput struct {
	Operation Key // the operation's key (KeyOperation)
	AttemptID string
	// Holds are the guarantees the attempt holds, as its reservation
	// bound them (Dispatch.Holds), or as the pins bind what the
	// operation records (reconciliation).
	Holds   []Hold
	Outcome Outcome
	Source  string // who reported: "provider", "reconciler", "reconcile:<operator>"
	Ref     string // the provider's reference for the report
	// Generation is the executor's generation, which must be the
	// operation's current one (CheckFence). With Claimant set it is
	// ignored: the claimant takes the operation over first, at the next
	// generation, atomically with the report (reconciliation).
	Generation uint64
	Claimant   string
	Now        time.Time
	// Controls are the controls recorded with the report; the step fills
	// in the guarantees and the generation.
	Controls Controls
	// Gate is the evidence gate the reply carries (the proposal's).
	Gate json.RawMessage
}

// SettleReads names what a settlement reads: the operation and the ledgers
// of the attempt's holds.
func SettleReads(in SettleInput) Reads {
	r := Reads{{Key: in.Operation, Access: Write}}
	for _, h := range in.Holds {
		r.add(h.ledgerKey().Key(), Write)
	}
	return r
}

// SettleStep records a report on every ledger and on the operation, with
// the decision record, in this order: the fence (a claimant takes the
// operation over at the next generation; any other executor must hold the
// current one, else CodeExecutorFenced and nothing is appended), the report
// on every ledger, a contradiction of the attempt's seal (recorded as an
// incident on the operation and the ledgers, and refused with
// CodeObservationContradictsSeal), then the operation's observation and
// decision record. A report every ledger refuses is not recorded on the
// operation, but the ledgers' incidents are. The same report again, and a
// non-definitive one after a seal, append nothing. The reply is the
// operation's status after the report, with its balances.
func SettleStep(s AttemptState, in SettleInput) Effects {
	op := orNew(s.Op)
	gen := in.Generation
	var eff Effects
	if in.Claimant != "" {
		cl := DecideClaim(op, in.Claimant)
		if cl.Refusal != nil {
			return settled(op, s.Ledgers, nil, in, Effects{Refusal: cl.Refusal})
		}
		eff.put(in.Operation, cl.Events...)
		gen = op.Generation + 1
	} else if r := CheckFence(op, gen); r != nil {
		eff = Effects{Refusal: r}
		if r.Code == wire.CodeExecutorFenced {
			eff.Incidents = []Incident{{Kind: string(wire.CodeExecutorFenced), AttemptID: in.AttemptID, Code: r.Code, Reason: r.Reason}}
		}
		return settled(op, s.Ledgers, nil, in, eff)
	}
	claim := eff.Append[in.Operation]
	eff = Effects{}
	n := 0
	for _, h := range in.Holds {
		k := h.ledgerKey()
		ld := DecideExposure(orNew(s.Ledgers[k]), Observe{AttemptID: in.AttemptID, Outcome: in.Outcome, Source: in.Source, Ref: in.Ref, Now: in.Now})
		eff.put(k.Key(), ld.Events...)
		n += len(ld.Events)
		if ld.Refusal != nil && eff.Refusal == nil {
			eff.Refusal = ld.Refusal
		}
	}
	if x, ok := sealedOnLedgers(op, s.Ledgers, in.AttemptID); ok && in.Outcome != x {
		return completeSealed(op, s.Ledgers, in, x, claim, gen)
	}
	if inc, ok := contradiction(op, in); ok {
		// The operation records the contradiction too, so it is seen also
		// for an operation that holds on no ledger.
		eff.put(in.Operation, inc)
		if eff.Refusal == nil {
			eff.Refusal = refuse(wire.CodeObservationContradictsSeal, "attempt %s is sealed %s; %s report from %s refused and recorded as an incident",
				in.AttemptID, inc.Sealed, in.Outcome, in.Source)
		}
		eff.Incidents = []Incident{{Kind: string(wire.CodeObservationContradictsSeal), AttemptID: in.AttemptID, Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}}
		return settled(op, s.Ledgers, nil, in, eff)
	}
	if _, sealed := op.Sealed(in.AttemptID); sealed && eff.Refusal == nil {
		return settled(op, s.Ledgers, nil, in, Effects{}) // repeats and non-definitive reports after a seal change nothing
	}
	if eff.Refusal != nil {
		return settled(op, s.Ledgers, nil, in, eff) // incidents only; the operation is unchanged
	}
	if n == 0 && op.records(in.AttemptID, in.Outcome) {
		// The same report again. Only the operation's record of it says
		// the report is stored whole: its observation is the last part of
		// a provider's report to be stored (Effects.Prefix), so ledgers
		// that already hold the observation without it are completed.
		return settled(op, s.Ledgers, nil, in, Effects{})
	}
	ctl, after := reportControls(s.Ledgers, eff, in, gen)
	// The decision record goes before the observation: the observation is
	// what says the report is stored whole (see Effects.Prefix).
	eff.put(in.Operation, append(claim, decisionRecord(opIdentity(op), in.AttemptID, in.Outcome.Status(), "", in.Source+": "+in.Ref, ctl),
		OperationObserved{AttemptID: in.AttemptID, Generation: gen, Outcome: in.Outcome, Source: in.Source})...)
	if in.Claimant == "" {
		// A provider's report may be stored as any prefix of: each
		// ledger's observation, in ledger key order, then the operation's
		// record and observation. Every such prefix is completed by the
		// same report again (above), which reconciliation makes when the
		// operation stays without its observation. A claimant's report
		// stays whole: its claim must go with it.
		eff.Prefix = true
		for _, k := range sortedLedgerKeys(in.Holds) {
			if len(eff.Append[k.Key()]) > 0 {
				eff.Order = append(eff.Order, k.Key())
			}
		}
		eff.Order = append(eff.Order, in.Operation)
	}
	return settled(op, s.Ledgers, after, in, eff)
}

// completeSealed settles an attempt whose ledgers hold a report the
// operation lacks (a provider's report stored in part, Effects.Prefix) on
// a report of another outcome, which cannot replace it: every ledger not
// yet sealed records the sealed outcome x, sourced "ledgers", as the rest
// of the chain would have; the operation records x too; and a definitive
// report of another outcome contradicts the seal, as it would once the
// operation holds it: an incident on the sealed ledgers and the operation,
// refused with CodeObservationContradictsSeal. It is stored whole.
func completeSealed(op *Operation, ledgers map[LedgerKey]*Ledger, in SettleInput, x Outcome, claim []Event, gen uint64) Effects {
	const source = "ledgers"
	var eff Effects
	for _, h := range in.Holds {
		k := h.ledgerKey()
		l := orNew(ledgers[k])
		rc, _ := l.Receipt(in.AttemptID)
		obs := Observe{AttemptID: in.AttemptID, Outcome: in.Outcome, Source: in.Source, Ref: in.Ref, Now: in.Now}
		if _, sealed := receiptSeal(rc); !sealed {
			obs = Observe{AttemptID: in.AttemptID, Outcome: x, Source: source, Ref: in.Ref, Now: in.Now}
		}
		ld := DecideExposure(l, obs)
		eff.put(k.Key(), ld.Events...)
		if ld.Refusal != nil && eff.Refusal == nil {
			eff.Refusal = ld.Refusal
		}
	}
	evs := claim
	if in.Outcome.Definitive() {
		inc := OperationIncident{AttemptID: in.AttemptID, Kind: wire.CodeObservationContradictsSeal, Sealed: x, Observed: in.Outcome,
			Source: in.Source, Ref: in.Ref}
		evs = append(evs, inc)
		if eff.Refusal == nil {
			eff.Refusal = refuse(wire.CodeObservationContradictsSeal, "attempt %s is sealed %s; %s report from %s refused and recorded as an incident",
				in.AttemptID, x, in.Outcome, in.Source)
		}
		eff.Incidents = []Incident{{Kind: string(wire.CodeObservationContradictsSeal), AttemptID: in.AttemptID, Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}}
	}
	ctl, after := reportControls(ledgers, eff, in, gen)
	evs = append(evs, decisionRecord(opIdentity(op), in.AttemptID, x.Status(), "", source+": the outcome the ledgers hold of a report stored in part", ctl),
		OperationObserved{AttemptID: in.AttemptID, Generation: gen, Outcome: x, Source: source})
	eff.put(in.Operation, evs...)
	return settled(op, ledgers, after, in, eff)
}

// records reports whether the operation records outcome as the
// observation of attempt attemptID.
func (o *Operation) records(attemptID string, outcome Outcome) bool {
	for _, a := range o.Attempts {
		if a.AttemptID == attemptID {
			return a.Outcome == outcome
		}
	}
	return false
}

// sortedLedgerKeys returns the ledger keys of holds, each once, in key order.
func sortedLedgerKeys(holds []Hold) []LedgerKey {
	var ks []LedgerKey
	for _, h := range holds {
		k := h.ledgerKey()
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b LedgerKey) int {
		return cmp.Or(cmp.Compare(a.GuaranteeID, b.GuaranteeID), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Window, b.Window))
	})
	return ks
}

// settled completes a settlement's effects with its reply: the operation's
// status once they apply, the balances of its holds, the refusal if any.
// after, when not nil, is the ledgers once the effects apply.
func settled(op *Operation, ledgers, after map[LedgerKey]*Ledger, in SettleInput, eff Effects) Effects {
	if after == nil {
		after = previewLedgers(ledgers, eff)
	}
	eff.Reply = statusOf(op.after(eff.Append[in.Operation]), HoldsOf(in.Holds, after))
	if eff.Refusal != nil {
		eff.Reply.Code, eff.Reply.Reason = eff.Refusal.Code, eff.Refusal.Reason
	}
	eff.Reply.AttemptID, eff.Reply.Gate = in.AttemptID, in.Gate
	return eff
}

// Step returns the settlement as a runtime drives it.
func (in SettleInput) Step() Step { return settleStep(in) }

type settleStep SettleInput

func (s settleStep) Reads() Reads { return SettleReads(SettleInput(s)) }

func (s settleStep) Decide(l Loaded) Effects {
	return SettleStep(attemptState(l, s.Operation), SettleInput(s))
}

func (s settleStep) Contended(r *Refusal) Effects {
	return Effects{Refusal: r, Reply: Reply{Status: wire.StatusUnknown, Code: r.Code, Reason: r.Reason, AttemptID: s.AttemptID, Gate: s.Gate}}
}

// attemptState is the state of a step on an attempt, from what was loaded.
func attemptState(l Loaded, op Key) AttemptState {
	s := AttemptState{Op: loaded[Operation](l, op)}
	for k := range l {
		if k.Kind == KindLedger {
			if s.Ledgers == nil {
				s.Ledgers = map[LedgerKey]*Ledger{}
			}
			s.Ledgers[k.Ledger()] = loaded[Ledger](l, k)
		}
	}
	return s
}

// after returns the operation once evs apply, folded on a copy (the
// operation itself when there are none).
func (o *Operation) after(evs []Event) *Operation {
	if len(evs) == 0 {
		return o
	}
	c := *o
	c.Attempts = append([]OpAttempt(nil), o.Attempts...)
	for _, ev := range evs {
		if err := c.Apply(ev); err != nil {
			return o
		}
	}
	return &c
}

// ReleaseInput releases an attempt as an operator (or the reconciler).
// Without ArtifactRef it closes the attempt, which only an unstarted one
// allows; with it, it asserts the absence of a started attempt whose
// dispatch was observed without a definitive outcome, on the evidence the
// artifact names. Either way the releaser claims the operation (a new
// generation), which fences the executor that held it. Without an
// operation (an attempt no operation knows), a close tombstones the attempt
// on the ledgers named, so that a late reservation for it is refused.
type ReleaseInput struct {
	Operation   Key       // the operation's key; the zero Key for an attempt no operation knows
	AttemptID   string    // the attempt released
	Holds       []HoldRef // the ledgers the attempt holds on (OpAttempt.Holds), or those to tombstone it on
	Executor    string    // the replica that releases
	Operator    string    // who: an operator id, or "reconciler"
	Reason      string    // why a close (recorded on the ledgers and the operation)
	ArtifactRef string    // the evidence of absence; empty for a close
}

func (h HoldRef) ledgerKey() LedgerKey {
	return LedgerKey{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Window: h.Window}
}

// ReleaseReads names what a release reads: the operation (if any) and the
// ledgers the attempt holds on.
func ReleaseReads(in ReleaseInput) Reads {
	var r Reads
	if in.Operation != (Key{}) {
		r.add(in.Operation, Write)
	}
	for _, h := range in.Holds {
		r.add(h.ledgerKey().Key(), Write)
	}
	return r
}

// ReleaseStep decides a close or an absence assertion on every ledger,
// then the claim and the operation's record: OperationClosed for a close,
// an observation of not_applied whose source names the operator and the
// artifact for an assertion. The first ledger refusal refuses the whole
// release (a started attempt cannot be closed: CodeDispatchActive; an
// unstarted one has no absence to assert: CodeNotStarted).
func ReleaseStep(s AttemptState, in ReleaseInput) Effects {
	assert := in.ArtifactRef != ""
	var eff Effects
	for _, h := range in.Holds {
		var cmd Command = Close{AttemptID: in.AttemptID, Reason: in.Reason}
		if assert {
			cmd = AssertAbsence{AttemptID: in.AttemptID, Operator: in.Operator, ArtifactRef: in.ArtifactRef}
		}
		ld := DecideExposure(orNew(s.Ledgers[h.ledgerKey()]), cmd)
		if ld.Refusal != nil {
			return released(s, in, Effects{Refusal: ld.Refusal})
		}
		eff.put(h.ledgerKey().Key(), ld.Events...)
	}
	if in.Operation == (Key{}) {
		if assert {
			return released(s, in, Effects{Refusal: refuse(wire.CodeAttemptUnknown, "attempt %s: unknown attempt", in.AttemptID)})
		}
		return released(s, in, eff)
	}
	op := orNew(s.Op)
	how := "/close:"
	if assert {
		how = "/assert:"
	}
	claim := DecideClaim(op, in.Executor+how+in.Operator)
	if claim.Refusal != nil {
		return released(s, in, Effects{Refusal: claim.Refusal})
	}
	eff.put(in.Operation, claim.Events...)
	if assert {
		eff.put(in.Operation, OperationObserved{AttemptID: in.AttemptID, Generation: op.Generation + 1,
			Outcome: OutcomeNotApplied, Source: "assertion:" + in.Operator + ":" + in.ArtifactRef})
	} else {
		eff.put(in.Operation, OperationClosed{AttemptID: in.AttemptID, Reason: in.Reason})
	}
	return released(s, in, eff)
}

// released completes a release's effects with its reply.
func released(s AttemptState, in ReleaseInput, eff Effects) Effects {
	if eff.Refusal != nil {
		eff.Reply = Reply{Status: wire.StatusRefused, Code: eff.Refusal.Code, Reason: eff.Refusal.Reason, AttemptID: in.AttemptID}
		return eff
	}
	after := previewLedgers(s.Ledgers, eff)
	for _, h := range in.Holds {
		l := orNew(after[h.ledgerKey()])
		eff.Reply.Guarantees = append(eff.Reply.Guarantees, GuaranteeHold{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount, Balance: l.Balance()})
	}
	eff.Reply.Status, eff.Reply.AttemptID = wire.StatusNotApplied, in.AttemptID
	if in.Operation != (Key{}) {
		op := orNew(s.Op).after(eff.Append[in.Operation])
		eff.Reply.Status, eff.Reply.OperationID, eff.Reply.ActionDigest = op.Status(), op.OperationID, op.ActionDigest
	}
	return eff
}

// Step returns the release as a runtime drives it.
func (in ReleaseInput) Step() Step { return releaseStep(in) }

type releaseStep ReleaseInput

func (s releaseStep) Reads() Reads { return ReleaseReads(ReleaseInput(s)) }

func (s releaseStep) Decide(l Loaded) Effects {
	return ReleaseStep(attemptState(l, s.Operation), ReleaseInput(s))
}

func (s releaseStep) Contended(r *Refusal) Effects {
	return Effects{Refusal: r, Reply: Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason, AttemptID: s.AttemptID}}
}

// reportControls are the controls a report's decision record carries: the
// holds with each ledger's balance as it is once eff's events apply (under
// the limit of its last reservation), and those ledgers.
func reportControls(ledgers map[LedgerKey]*Ledger, eff Effects, in SettleInput, gen uint64) (Controls, map[LedgerKey]*Ledger) {
	after := previewLedgers(ledgers, eff)
	var holds []GuaranteeHold
	for _, h := range in.Holds {
		holds = append(holds, GuaranteeHold{GuaranteeID: h.GuaranteeID, DefinitionDigest: h.DefinitionDigest, Resource: h.Resource, Amount: h.Amount,
			Balance: orNew(after[h.ledgerKey()]).Balance()})
	}
	ctl := in.Controls
	ctl.Generation, ctl.Guarantees = gen, holds
	return ctl, after
}
