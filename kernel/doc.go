// Package kernel holds every rule of the ledger, once, as pure steps: a
// step takes a named state (the subjects it read, each by its Key) and an
// input (with the time, the ids and the runtime's manifest it needs) and
// returns Effects — the events to append keyed by subject, the dispatch to
// make after the append, the reply, incidents. It does no I/O, reads no
// clock and draws no randomness; the runtime (package aggregates) loads,
// calls the kernel, appends and dispatches.
//
// The governed steps and what each reads:
//
//	ProposeReads, ProposeStep   a proposal: every obligation of DESIGN section 1, in order
//	SettleReads, SettleStep     a report on an attempt (the provider's, reconciliation's)
//	ReleaseReads, ReleaseStep   close an unstarted attempt, assert the absence of a started one
//	FailureReads, FailureStep   a failed dispatch counted against its capability's breaker
//
// Every other governed change is a step too (verb.go): VerbStep decides an
// operator verb over its one subject (a grant, an approval, a waiver, a
// kill switch, a two-person request...) with the verb's Decide function,
// ReadStep reads one subject guarded, ExposureStep decides one command on
// one ledger, and AdmitRunInput, MarkInput, ImportInput, EnrollStep and
// BackfillStep decide over the several subjects they name.
//
// Each input's Step method is the step as a runtime drives it (Step:
// Reads, Decide over what was loaded, Contended when conflicts exhausted
// the retries). The usage loop, as aggregates.Engine.Run runs it:
//
//	in := kernel.ProposeInput{Manifest: m, Tenant: t, Principal: p, Body: body,
//		Now: clock.Now(), OperationID: ids.New(), AttemptID: ids.New(), Executor: replica}
//	step := in.Step()
//	loaded := load(step.Reads())      // each key's subject folded; Fresh ones read now
//	eff := step.Decide(loaded)        // pure: decided again on fresher states after a conflict
//	append(eff.Append)                // one atomic append, each subject on the sequence read,
//	                                  // Guard reads checked with it
//	if eff.Dispatch != nil {          // only once the append is stored
//		obs := provider.Dispatch(eff.Dispatch.AttemptID, eff.Dispatch.Arguments)
//		eff = run(eff.Dispatch.Settle(obs.Outcome, obs.Ref, clock.Now()).Step())
//		run(kernel.FailureInput{...}.Step()) // a failure counts against the breaker
//	}
//	reply(eff.Reply)                  // after the append; Unbound and Incidents after it
//
// ProposeStep is the only proposal path. What the runtime keeps beside the
// stream enters as inputs (ProposeInput: the clock, new ids, its witnesses'
// status, its refusal window), and what the effects leave to it comes back
// in Effects: a key another principal holds (Scoped: decide again with
// ProposeInput.Scoped on the principal's own subject of the key), a refusal
// the window counts (Tally), a refusal no operation records (Unbound).
// PrepareProposal prepares a proposal once (bound, parse, tenant,
// capability, BindAction) for a runtime that reads its parsed form before
// it runs the step.
//
// Effects documents the order the runtime keeps. The steps below the
// governed ones (DecideExposure over one ledger, DecideOpen, DecideApproval,
// DecideConsume, DecideRedefine, DecideKillSwitch...) are the rules the
// governed steps compose; operator verbs on one subject call them through a
// runtime directly.
//
// Also here: the action digest (ActionDigest over RFC 8785 JCS), strict
// argument decoding (DecodeArguments), amounts and pointers, guarantee
// definitions, pins and windows, the evidence gate and the context
// compiler. Its refusal codes are package wire's catalog (wire.Codes).
package kernel
