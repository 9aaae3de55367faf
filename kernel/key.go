package kernel

import "fmt"

// Aggregate is the state folded from one subject's events: an Operation, a
// Ledger, a Run, the tenant's Control...
type Aggregate interface {
	Apply(Event) error
}

// Kind is what a subject holds. The zero value is invalid.
type Kind uint8

// Kinds of subjects a step reads.
const (
	KindOperation       Kind = iota + 1 // one (run, operation key)
	KindRun                             // one run's budget
	KindApproval                        // one approval
	KindEvidence                        // one evidence reference
	KindLedger                          // one (guarantee, resource, window) exposure ledger
	KindControl                         // the tenant's kill switch, guarantee versions and enforcement domain
	KindIntegrity                       // the tenant's audit log integrity
	KindAuthority                       // the tenant's grants and revocations
	KindBreaker                         // one capability's circuit breaker
	KindRefusals                        // one principal's refusals no operation records
	KindPin                             // one guarantee's pinned definition
	KindPacks                           // the tenant's context pack catalog
	KindOperatorRequest                 // one two-person request
)

var kindNames = [...]string{"invalid", "operation", "run", "approval", "evidence", "ledger", "control", "integrity", "authority", "breaker", "refusals", "pin", "packs", "operator request"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Key names one subject of a tenant by what it holds, never by how it is
// stored: the runtime maps a key to its stream subject (package
// aggregates). ID is the run, approval, evidence reference, capability,
// principal or guarantee the subject belongs to; Sub is an operation's key
// or a ledger's resource; Window is a ledger's calendar window; Scope is
// the principal of an operation's key scoped to it (KeyScopedOperation).
// Keys are comparable: steps index their states by them.
type Key struct {
	Kind   Kind
	ID     string
	Sub    string
	Window string
	Scope  string
}

// KeyOperation is the key of the operation (runID, operationKey).
func KeyOperation(runID, operationKey string) Key {
	return Key{Kind: KindOperation, ID: runID, Sub: operationKey}
}

// KeyScopedOperation is the key of principal's own operation (runID,
// operationKey): where its operation is when the key of the run is held by
// another principal's (OpenScoped).
func KeyScopedOperation(runID, operationKey, principal string) Key {
	return Key{Kind: KindOperation, ID: runID, Sub: operationKey, Scope: principal}
}

// KeyRun is the key of a run's budget.
func KeyRun(runID string) Key { return Key{Kind: KindRun, ID: runID} }

// KeyApproval is the key of an approval.
func KeyApproval(approvalID string) Key { return Key{Kind: KindApproval, ID: approvalID} }

// KeyEvidence is the key of an evidence reference's record.
func KeyEvidence(ref string) Key { return Key{Kind: KindEvidence, ID: ref} }

// KeyBreaker is the key of a capability's circuit breaker.
func KeyBreaker(capabilityID string) Key { return Key{Kind: KindBreaker, ID: capabilityID} }

// KeyRefusals is the key of a principal's refusals that no operation
// records.
func KeyRefusals(principal string) Key { return Key{Kind: KindRefusals, ID: principal} }

// KeyPin is the key of a guarantee's pin.
func KeyPin(guaranteeID string) Key { return Key{Kind: KindPin, ID: guaranteeID} }

// The keys of the tenant's single subjects.
var (
	KeyControl   = Key{Kind: KindControl}
	KeyIntegrity = Key{Kind: KindIntegrity}
	KeyAuthority = Key{Kind: KindAuthority}
	KeyPacks     = Key{Kind: KindPacks}
)

// Key is the key of the ledger.
func (k LedgerKey) Key() Key {
	return Key{Kind: KindLedger, ID: k.GuaranteeID, Sub: k.Resource, Window: k.Window}
}

// Ledger returns the ledger key of a ledger's key.
func (k Key) Ledger() LedgerKey {
	return LedgerKey{GuaranteeID: k.ID, Resource: k.Sub, Window: k.Window}
}

// String describes the key for errors and logs.
func (k Key) String() string {
	switch {
	case k.Scope != "":
		return fmt.Sprintf("%s %q/%q (%q)", k.Kind, k.ID, k.Sub, k.Scope)
	case k.Window != "":
		return fmt.Sprintf("%s %q/%q/%s", k.Kind, k.ID, k.Sub, k.Window)
	case k.Sub != "":
		return fmt.Sprintf("%s %q/%q", k.Kind, k.ID, k.Sub)
	case k.ID != "":
		return fmt.Sprintf("%s %q", k.Kind, k.ID)
	}
	return k.Kind.String()
}

// New returns the empty state of the key's subject (nil for an invalid
// kind).
func (k Key) New() Aggregate {
	switch k.Kind {
	case KindOperation:
		return &Operation{}
	case KindRun:
		return &Run{}
	case KindApproval:
		return &Approval{}
	case KindEvidence:
		return &EvidenceRecord{}
	case KindLedger:
		return &Ledger{}
	case KindControl:
		return &Control{}
	case KindIntegrity:
		return &LogIntegrity{}
	case KindAuthority:
		return &Authority{}
	case KindBreaker:
		return &Breaker{}
	case KindRefusals:
		return &RefusalLog{}
	case KindPin:
		return &Pin{}
	case KindPacks:
		return &PackCatalog{}
	case KindOperatorRequest:
		return &OperatorRequest{}
	}
	return nil
}

// Check refuses a stored event that names another subject than the key's:
// an approval, run or evidence event of another id, a reservation of
// another ledger. Keys of long ids share a hashed subject token only with
// negligible probability; the bodies carry the full ids, so a collision is
// caught here instead of merging two aggregates.
func (k Key) Check(ev Event) error {
	switch k.Kind {
	case KindApproval:
		var got string
		switch e := ev.(type) {
		case ApprovalGranted:
			got = e.ApprovalID
		case ApprovalRedeemed:
			got = e.ApprovalID
		case ApprovalDenied:
			got = e.ApprovalID
		}
		if got != k.ID {
			return fmt.Errorf("approval event for %q on the subject of %q", got, k.ID)
		}
	case KindRun:
		if got := RunIDOf(ev); got != k.ID {
			return fmt.Errorf("run event for %q on the subject of %q", got, k.ID)
		}
	case KindEvidence:
		if got := EvidenceRefOf(ev); got != k.ID {
			return fmt.Errorf("evidence event for %q on the subject of %q", got, k.ID)
		}
	case KindLedger:
		if r, ok := ev.(ExposureReserved); ok && (r.Resource != k.Sub || r.GuaranteeID != k.ID || r.Window != k.Window) {
			return fmt.Errorf("reservation for %q/%q on the subject of %q/%q", r.GuaranteeID, r.Resource, k.ID, k.Sub)
		}
	}
	return nil
}

// Access is how a step reads a subject: what a copy of it that is no longer
// current may do to the decision, and so how the runtime must read it. The
// zero value is invalid.
type Access uint8

// Accesses.
const (
	// Write: the step may append to the subject. Its events are appended
	// on the sequence the state was read at, so a stale read stores
	// nothing and the step is decided again.
	Write Access = iota + 1
	// Guard: read only, guarded like a Write: an append of the decision
	// stores nothing if the subject moved since it was read (the kill
	// switch and the log's integrity, which every proposal reads).
	Guard
	// Stale: read only and unguarded, for a subject whose later changes
	// can only make the decision stricter (the ledger of a replaced
	// guarantee, to which nothing is reserved any more: a stale copy
	// overstates its exposure, never understates it).
	Stale
	// Fresh: read only, from the store during the call rather than from a
	// copy kept between calls, and unguarded: a change stored before the
	// call takes effect for it on every replica (authority, evidence, a
	// breaker). An append cannot guard these: an atomic batch carries only
	// as many guards as it has events after the first of a subject.
	Fresh
)

var accessNames = [...]string{"invalid", "write", "guard", "stale", "fresh"}

// String returns the access's name.
func (a Access) String() string {
	if int(a) < len(accessNames) {
		return accessNames[a]
	}
	return "invalid"
}

// Read is one subject a step reads, and how.
type Read struct {
	Key    Key
	Access Access
}

// Reads are what a step reads, named before it runs (the prefetch): the
// runtime loads each, then decides. A key appears at most once.
type Reads []Read

// add appends a read of k unless k is read already; a Write read of a key
// read otherwise before makes it a Write.
func (r *Reads) add(k Key, a Access) {
	for i := range *r {
		if (*r)[i].Key == k {
			if a == Write {
				(*r)[i].Access = Write
			}
			return
		}
	}
	*r = append(*r, Read{Key: k, Access: a})
}

// Loaded is what the runtime read for a step's Reads: every key's state,
// the empty state for an empty subject.
type Loaded map[Key]Aggregate

// Step is a kernel step as a runtime drives it: Reads names the subjects
// to load, Decide decides over them. Decide is pure: the runtime may call
// it again, on fresher states, after a conflict. Contended is the step's
// answer when the runtime gave up deciding it after repeated conflicts
// (shared_guarantee_contention): nothing was appended.
type Step interface {
	Reads() Reads
	Decide(Loaded) Effects
	Contended(*Refusal) Effects
}

// loaded returns the state of k, of its type, or the empty one.
func loaded[T any, PT interface {
	*T
	Aggregate
}](l Loaded, k Key) PT {
	if a, ok := l[k].(PT); ok && a != nil {
		return a
	}
	return PT(new(T))
}
