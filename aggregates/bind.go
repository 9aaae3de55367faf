package aggregates

import "github.com/contextos/ledger/kernel"

// A Binding ties one subject of a transaction to a named field of the
// kernel state the decision reads (Operation, Run, a ledger of Ledgers…)
// and to the field of the decision that holds the events for it. The engine
// writes the subject's current state into the state field before Decide and
// reads the events field after it, so a transaction names its subjects the
// way the kernel step does and no caller indexes states by position:
//
//	var st kernel.SettleState
//	var d kernel.SettleDecision
//	tx := aggregates.Tx{Tenant: t, Bind: []aggregates.Binding{
//		aggregates.Bind(opRef, &st.Op, &d.Op),
//		aggregates.BindKey(ledgerRef, &st.Ledgers, &d.Ledgers, hold.Key()),
//	}, Decide: func() *kernel.Refusal { d = kernel.DecideSettle(st, cmd); return d.Refusal }}
type Binding interface {
	ref() Ref
	set(State)
	events() []kernel.Event
	guarded() bool
}

// Bind binds ref to the state field *state and the events field *evs.
func Bind[T any, PT interface {
	*T
	State
}](ref Ref, state *PT, evs *[]kernel.Event) Binding {
	return &one[T, PT]{r: ref, state: state, evs: evs}
}

// Guard binds ref to the state field *state as a subject the decision reads
// and never appends to, guarded like the subjects it appends to: the append
// of a decision that appends anything stores nothing if the subject moved
// since it was read (the store checks its last sequence in the same atomic
// batch), so a stale copy of it can never let a decision through. A decision
// that appends nothing is checked against the store before it is acted on,
// as for any subject.
func Guard[T any, PT interface {
	*T
	State
}](ref Ref, state *PT) Binding {
	return &one[T, PT]{r: ref, state: state, guard: true}
}

// Read binds ref to the entry key of the state map *states (made if nil)
// as a subject the decision reads and never appends to, without a guard:
// the append of a decision that appends elsewhere does not check that the
// subject stayed as read (a refusal or a no-op is still checked against the
// store before it is answered, as for any subject). It saves the guard's
// place in the atomic batch, which carries only as many guards as it has
// events after the first of a subject. Use it only for a subject whose
// later changes can only make the decision stricter: the ledger of a
// replaced guarantee, to which nothing can be reserved any more, so a stale
// copy overstates its exposure and never understates it.
func Read[K comparable, T any, PT interface {
	*T
	State
}](ref Ref, states *map[K]PT, key K) Binding {
	if *states == nil {
		*states = map[K]PT{}
	}
	return &entryOf[K, T, PT]{r: ref, states: states, key: key}
}

// BindKey binds ref to the entry key of the state map *states and of the
// events map *evs (a kernel state's ledgers by key and the decision's
// events by the same key); either map is made if nil.
func BindKey[K comparable, T any, PT interface {
	*T
	State
}](ref Ref, states *map[K]PT, evs *map[K][]kernel.Event, key K) Binding {
	if *states == nil {
		*states = map[K]PT{}
	}
	return &keyed[K, T, PT]{r: ref, states: states, evs: evs, key: key}
}

type one[T any, PT interface {
	*T
	State
}] struct {
	r     Ref
	state *PT
	evs   *[]kernel.Event
	guard bool
}

func (b *one[T, PT]) ref() Ref      { return b.r }
func (b *one[T, PT]) set(s State)   { *b.state = s.(PT) }
func (b *one[T, PT]) guarded() bool { return b.guard }
func (b *one[T, PT]) events() []kernel.Event {
	if b.evs == nil {
		return nil
	}
	return *b.evs
}

type keyed[K comparable, T any, PT interface {
	*T
	State
}] struct {
	r      Ref
	states *map[K]PT
	evs    *map[K][]kernel.Event
	key    K
}

func (b *keyed[K, T, PT]) ref() Ref      { return b.r }
func (b *keyed[K, T, PT]) set(s State)   { (*b.states)[b.key] = s.(PT) }
func (b *keyed[K, T, PT]) guarded() bool { return false }
func (b *keyed[K, T, PT]) events() []kernel.Event {
	if b.evs == nil || *b.evs == nil {
		return nil
	}
	return (*b.evs)[b.key]
}

type entryOf[K comparable, T any, PT interface {
	*T
	State
}] struct {
	r      Ref
	states *map[K]PT
	key    K
}

func (b *entryOf[K, T, PT]) ref() Ref               { return b.r }
func (b *entryOf[K, T, PT]) set(s State)            { (*b.states)[b.key] = s.(PT) }
func (b *entryOf[K, T, PT]) guarded() bool          { return false }
func (b *entryOf[K, T, PT]) events() []kernel.Event { return nil }

// txDecider decides a Tx: it writes each subject's state into its bound
// field, calls Decide and reads the bound events fields.
type txDecider struct{ tx Tx }

func (d txDecider) decide(states []State) ([][]kernel.Event, *kernel.Refusal, any, error) {
	for i, b := range d.tx.Bind {
		b.set(states[i])
	}
	r := d.tx.Decide()
	evs := make([][]kernel.Event, len(d.tx.Bind))
	for i, b := range d.tx.Bind {
		evs[i] = b.events()
	}
	return evs, r, nil, nil
}

func (d txDecider) guarded(i int) bool { return d.tx.Bind[i].guarded() }

func (d txDecider) folded() {
	if d.tx.Done != nil {
		d.tx.Done()
	}
}
