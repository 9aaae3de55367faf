package kernel

import "slices"

// KeyOperatorRequest is the key of a two-person request.
func KeyOperatorRequest(requestID string) Key { return Key{Kind: KindOperatorRequest, ID: requestID} }

// VerbStep is the step of a verb that decides over the one subject k (a
// grant, an approval, a waiver, a request, a kill switch...): decide
// returns its decision over k's state (the empty state for an empty
// subject) and the data its reply reports. The decision's events go to k,
// even with its refusal. decide must be pure and must not keep the state it
// is handed, nor return data that shares it: the runtime's copy moves on
// once the call returns (AfterOf folds the decision into a copy). The data
// is in the effects' Reply.Data.
func VerbStep[T any, PT interface {
	*T
	Aggregate
}](k Key, decide func(PT) (Decision, any)) Step {
	return verbStep[T, PT]{key: k, access: Write, decide: decide}
}

// ReadStep is the step that reads the one subject k, guarded like a
// write, and appends nothing: read returns the data its reply reports from
// k's state, which the runtime checks was current during the call. read
// must not return data that shares the state.
func ReadStep[T any, PT interface {
	*T
	Aggregate
}](k Key, read func(PT) any) Step {
	return verbStep[T, PT]{key: k, access: Guard, decide: func(s PT) (Decision, any) { return Decision{}, read(s) }}
}

type verbStep[T any, PT interface {
	*T
	Aggregate
}] struct {
	key    Key
	access Access
	decide func(PT) (Decision, any)
}

func (s verbStep[T, PT]) Reads() Reads { return Reads{{Key: s.key, Access: s.access}} }

func (s verbStep[T, PT]) Decide(l Loaded) Effects {
	d, data := s.decide(loaded[T, PT](l, s.key))
	eff := Effects{Refusal: d.Refusal, Reply: Reply{Data: data}}
	eff.put(s.key, d.Events...)
	return eff
}

func (s verbStep[T, PT]) Contended(r *Refusal) Effects { return Effects{Refusal: r} }

// ExposureStep decides one command on one resource ledger
// (DecideExposure): the step of callers that need a single ledger (tests,
// benchmarks, an operator's close of one attempt). Its reply's Data is the
// ledger's Balance once the decision applies.
func ExposureStep(k LedgerKey, cmd Command) Step {
	return VerbStep(k.Key(), func(l *Ledger) (Decision, any) {
		d := DecideExposure(l, cmd)
		after := previewLedgers(map[LedgerKey]*Ledger{k: l}, Effects{Append: map[Key][]Event{k.Key(): d.Events}})
		return d, after[k].Balance()
	})
}

// AfterOf returns a copy of s once evs apply: what a verb's reply reports of
// the state its decision leaves. copyOf copies what Apply changes in place
// (slices appended to, maps written).
func AfterOf[T any, PT interface {
	*T
	Aggregate
}](s PT, evs []Event, copyOf func(T) T) PT {
	c := copyOf(*s)
	p := PT(&c)
	for _, ev := range evs {
		_ = p.Apply(ev)
	}
	return p
}

// Copy returns a copy of a run that shares nothing Apply changes.
func (r Run) Copy() Run { r.Children = slices.Clone(r.Children); return r }

// Copy returns a copy of a catalog that shares nothing Apply changes.
func (c PackCatalog) Copy() PackCatalog {
	c.Versions, c.Promotions = slices.Clone(c.Versions), slices.Clone(c.Promotions)
	return c
}

// AdmitRunInput admits a run (DecideAdmitRun) over its run and its parent's
// (when it names a parent other than itself), on the pack catalog as read
// during the call.
type AdmitRunInput struct {
	AdmitRun
	Packs *PackCatalog
}

// Step returns the admission as a runtime drives it. Its reply's Data is
// the run once admitted (a Run).
func (in AdmitRunInput) Step() Step { return admitRunStep(in) }

type admitRunStep AdmitRunInput

func (s admitRunStep) parent() bool { return s.ParentRunID != "" && s.ParentRunID != s.RunID }

func (s admitRunStep) Reads() Reads {
	r := Reads{{Key: KeyRun(s.RunID), Access: Write}}
	if s.parent() {
		r = append(r, Read{Key: KeyRun(s.ParentRunID), Access: Write})
	}
	return r
}

func (s admitRunStep) Decide(l Loaded) Effects {
	st := AdmitState{Run: loaded[Run](l, KeyRun(s.RunID)), Packs: s.Packs}
	if s.parent() {
		st.Parent = loaded[Run](l, KeyRun(s.ParentRunID))
	}
	d := DecideAdmitRun(st, s.AdmitRun)
	eff := Effects{Refusal: d.Refusal}
	eff.put(KeyRun(s.RunID), d.Child...)
	if s.parent() {
		eff.put(KeyRun(s.ParentRunID), d.Parent...)
	}
	if d.Refusal == nil {
		eff.Reply.Data = *AfterOf(st.Run, d.Child, Run.Copy)
	}
	return eff
}

func (s admitRunStep) Contended(r *Refusal) Effects { return Effects{Refusal: r} }

// MarkInput records a conflict marker (DecideMark) on every evidence
// reference it names, in one atomic append.
type MarkInput struct {
	Operator string
	Marker   EvidenceConflictMarker
}

// Step returns the marking as a runtime drives it.
func (in MarkInput) Step() Step { return markStep(in) }

type markStep MarkInput

func (s markStep) Reads() Reads {
	var r Reads
	for _, ref := range s.Marker.EvidenceRefs {
		r = append(r, Read{Key: KeyEvidence(ref), Access: Write})
	}
	return r
}

func (s markStep) Decide(l Loaded) Effects {
	st := MarkState{Records: map[string]*EvidenceRecord{}}
	for _, ref := range s.Marker.EvidenceRefs {
		st.Records[ref] = loaded[EvidenceRecord](l, KeyEvidence(ref))
	}
	d := DecideMark(st, s.Operator, s.Marker)
	eff := Effects{Refusal: d.Refusal}
	for _, ref := range s.Marker.EvidenceRefs {
		eff.put(KeyEvidence(ref), d.Records[ref]...)
	}
	return eff
}

func (s markStep) Contended(r *Refusal) Effects { return Effects{Refusal: r} }

// ImportInput imports one row of prior exposure (DecideImportRow) on the
// row's ledger. The control subject (the guarantee's latest limit) and the
// ledgers of the guarantees it replaces (Replaced, on the row's resource
// and window) are read unguarded: a one-event append carries no guard, a
// limit lowered during an import decides the rows after it, and nothing is
// reserved on a replaced guarantee any more.
type ImportInput struct {
	Row      ImportRow
	Pin      *Pin
	Replaced []LedgerKey
}

// Ledger is the key of the row's ledger.
func (in ImportInput) Ledger() Key {
	return LedgerKey{GuaranteeID: in.Row.GuaranteeID, Resource: in.Row.Resource, Window: in.Row.Window}.Key()
}

// Step returns the import as a runtime drives it.
func (in ImportInput) Step() Step { return importStep(in) }

type importStep ImportInput

func (s importStep) Reads() Reads {
	r := Reads{{Key: ImportInput(s).Ledger(), Access: Write}}
	r.add(KeyControl, Stale)
	for _, k := range s.Replaced {
		r.add(k.Key(), Stale)
	}
	return r
}

func (s importStep) Decide(l Loaded) Effects {
	k := ImportInput(s).Ledger()
	st := ImportState{Pin: s.Pin, Control: loaded[Control](l, KeyControl), Ledger: loaded[Ledger](l, k)}
	for _, r := range s.Replaced {
		if st.Replaced == nil {
			st.Replaced = map[LedgerKey]*Ledger{}
		}
		st.Replaced[r] = loaded[Ledger](l, r.Key())
	}
	d := DecideImportRow(st, s.Row)
	eff := Effects{Refusal: d.Refusal}
	eff.put(k, d.Events...)
	return eff
}

func (s importStep) Contended(r *Refusal) Effects { return Effects{Refusal: r} }

// EnrollStep pins def for tenant on its first use (DecideEnroll), on the
// guarantee's pin and the tenant's control subject in one atomic append.
func EnrollStep(tenant string, def Definition) Step {
	return pinStep{id: def.ID, decide: func(s PinState) PinDecision { return DecideEnroll(s, tenant, def) }}
}

// BackfillStep enrolls a guarantee pinned before enrollment existed
// (DecideBackfill).
func BackfillStep(guaranteeID string) Step { return pinStep{id: guaranteeID, decide: DecideBackfill} }

type pinStep struct {
	id     string
	decide func(PinState) PinDecision
}

func (s pinStep) Reads() Reads {
	return Reads{{Key: KeyPin(s.id), Access: Write}, {Key: KeyControl, Access: Write}}
}

func (s pinStep) Decide(l Loaded) Effects {
	d := s.decide(PinState{Pin: loaded[Pin](l, KeyPin(s.id)), Control: loaded[Control](l, KeyControl)})
	eff := Effects{Refusal: d.Refusal}
	eff.put(KeyPin(s.id), d.Pin...)
	eff.put(KeyControl, d.Control...)
	return eff
}

func (s pinStep) Contended(r *Refusal) Effects { return Effects{Refusal: r} }
