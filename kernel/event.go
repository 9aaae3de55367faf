package kernel

import "github.com/contextos/ledger/wire"

// Event is a fact the kernel decided. EventType is its persisted name; the
// schema version of every type below is EventVersion. Bodies are encoded with
// Canonical; the envelope (id, tenant, time, signature) is added by package
// events.
type Event interface {
	EventType() string
}

// EventVersion is the schema version of every event type of this kernel.
const EventVersion = 1

// Persisted event type names. They are explicit strings, never reflected Go
// type names, so renaming a Go type cannot change the record.
const (
	TypeGuaranteePinned         = "guarantee.pinned"
	TypeExposureReserved        = "exposure.reserved"
	TypeExposureDispatchStarted = "exposure.dispatch_started"
	TypeExposureObserved        = "exposure.observed"
	TypeExposureClosed          = "exposure.closed"
	TypeExposureTombstoned      = "exposure.tombstoned"
	TypeExposureAbsenceAsserted = "exposure.absence_asserted"
	TypeExposureIncident        = "exposure.incident"
)

// GuaranteePinned pins a guarantee definition for a tenant.
type GuaranteePinned struct {
	Tenant           string     `json:"tenant"`
	Definition       Definition `json:"definition"`
	DefinitionDigest string     `json:"definition_digest"`
}

// ExposureReserved holds Amount on the resource for an attempt.
type ExposureReserved struct {
	GuaranteeID      string `json:"guarantee_id"`
	Resource         string `json:"resource"`
	AttemptID        string `json:"attempt_id"`
	OperationID      string `json:"operation_id"`
	Amount           int64  `json:"amount"`
	Limit            int64  `json:"limit"`
	DefinitionDigest string `json:"definition_digest"`
	// OverLimit marks a reservation of a guarantee in observe mode that
	// enforcement would have refused (shared_guarantee_exceeded).
	OverLimit bool `json:"over_limit,omitempty"`
	// Window is the calendar window of the ledger; Rolling the duration in
	// seconds of a rolling window, whose reservations carry their decision
	// time At (RFC 3339).
	Window  string `json:"window,omitempty"`
	Rolling int64  `json:"rolling_seconds,omitempty"`
	At      string `json:"at,omitempty"`
	// Carried is the exposure on the resource of the guarantees this
	// one replaces, counted against Limit when it was reserved.
	Carried int64 `json:"carried,omitempty"`
	// Action is the reservation's SameActionKey when its capability is
	// fenced: the receipt keeps it while it is open.
	Action string `json:"action,omitempty"`
}

// ExposureDispatchStarted is the durable gate before a provider call: from
// here on the effect may exist, so the hold can no longer be closed.
type ExposureDispatchStarted struct {
	AttemptID string `json:"attempt_id"`
}

// ExposureObserved records what the provider (or reconciliation) reported.
// Applied commits the hold, not_applied releases it, anything else keeps it.
type ExposureObserved struct {
	AttemptID string  `json:"attempt_id"`
	Outcome   Outcome `json:"outcome"`
	Source    string  `json:"source"`
	Ref       string  `json:"ref,omitempty"`
	At        string  `json:"at,omitempty"` // the decision time, on a rolling window's ledger
}

// ExposureClosed releases the hold of an attempt that never started.
type ExposureClosed struct {
	AttemptID string `json:"attempt_id"`
	Reason    string `json:"reason"`
}

// ExposureTombstoned closes an attempt the ledger never saw, so that a late
// reservation for it is refused.
type ExposureTombstoned struct {
	AttemptID string `json:"attempt_id"`
	Reason    string `json:"reason"`
}

// ExposureAbsenceAsserted releases a started attempt on an operator's
// accountable assertion that the effect does not exist.
type ExposureAbsenceAsserted struct {
	AttemptID   string `json:"attempt_id"`
	Operator    string `json:"operator"`
	ArtifactRef string `json:"artifact_ref"`
}

// ExposureIncident records a refused observation that contradicts a seal.
type ExposureIncident struct {
	AttemptID string    `json:"attempt_id"`
	Kind      wire.Code `json:"kind"`
	Sealed    Outcome   `json:"sealed"`
	Observed  Outcome   `json:"observed"`
	Source    string    `json:"source"`
	Ref       string    `json:"ref,omitempty"`
}

// EventType implements Event.
func (GuaranteePinned) EventType() string { return TypeGuaranteePinned }

// EventType implements Event.
func (ExposureReserved) EventType() string { return TypeExposureReserved }

// EventType implements Event.
func (ExposureDispatchStarted) EventType() string { return TypeExposureDispatchStarted }

// EventType implements Event.
func (ExposureObserved) EventType() string { return TypeExposureObserved }

// EventType implements Event.
func (ExposureClosed) EventType() string { return TypeExposureClosed }

// EventType implements Event.
func (ExposureTombstoned) EventType() string { return TypeExposureTombstoned }

// EventType implements Event.
func (ExposureAbsenceAsserted) EventType() string { return TypeExposureAbsenceAsserted }

// EventType implements Event.
func (ExposureIncident) EventType() string { return TypeExposureIncident }

// Decision is what a kernel Decide returns. Events are to be appended in
// order, on the sequence the decision was made on, even when Refusal is set
// (a refusal may record an incident). No events and no refusal means the
// command was an idempotent repeat.
type Decision struct {
	Events  []Event
	Refusal *Refusal
}

// Outcome is what a provider reports about an attempt. The zero value is
// invalid.
type Outcome string

// Outcomes. Applied and NotApplied are definitive and seal an attempt; the
// others keep its hold.
const (
	OutcomeApplied    Outcome = "applied"
	OutcomeNotApplied Outcome = "not_applied"
	OutcomePending    Outcome = "pending"
	OutcomeUnknown    Outcome = "unknown"
	OutcomePartial    Outcome = "partial"
)

// Valid reports whether o is one of the outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeApplied, OutcomeNotApplied, OutcomePending, OutcomeUnknown, OutcomePartial:
		return true
	}
	return false
}

// Definitive reports whether o seals an attempt.
func (o Outcome) Definitive() bool { return o == OutcomeApplied || o == OutcomeNotApplied }
