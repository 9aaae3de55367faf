package kernel

import (
	"fmt"

	"github.com/contextos/ledger/wire"
)

// The integrity of a tenant's audit log, as its witnesses see it. A witness
// that cosigned a longer log, or another log of the same size, refuses the
// runtime's checkpoint: the history the runtime serves on was rewritten or
// forked (an insider deleted and republished the streams, or a restore went
// back in time). Dispatching on that history could break a ceiling the lost
// events held, so the proposal step refuses every proposal from the moment
// the refusal is recorded until an operator resolves it. Separately, a
// runtime whose checkpoints lack a witness's cosignature (the witness is
// down, or refuses for another reason) refuses proposals when its witness
// policy is require, and serves with a warning when it is warn.

// TypeIntegrityFailed is the type of IntegrityFailed.
const TypeIntegrityFailed = "integrity.failed"

// TypeIntegrityResolved is the type of IntegrityResolved.
const TypeIntegrityResolved = "integrity.resolved"

// Kinds of IntegrityFailed.
const (
	IntegrityShrank = "shrank" // the witness cosigned more records than the log holds
	IntegrityForked = "forked" // the witness cosigned records the log does not extend
)

// IntegrityFailed records a witness's answer that the tenant's audit log
// shrank or forked since it last cosigned it. It opens an incident that
// stops dispatch until IntegrityResolved.
type IntegrityFailed struct {
	Witness     string `json:"witness"`      // the witness's key name
	Kind        string `json:"kind"`         // IntegrityShrank or IntegrityForked
	LogSize     int64  `json:"log_size"`     // the size of the checkpoint the witness refused
	WitnessSize int64  `json:"witness_size"` // the size the witness had cosigned (0 when it did not say)
	Reason      string `json:"reason"`       // the witness's answer
	Executor    string `json:"executor"`     // the replica that met the refusal
}

// EventType implements Event.
func (IntegrityFailed) EventType() string { return TypeIntegrityFailed }

// Resolutions of IntegrityResolved.
const (
	// ResolutionRestored: the streams were restored from a copy that holds
	// at least the witnessed history, and the witness cosigns again.
	ResolutionRestored = "restored"
	// ResolutionRotated: the history is lost; the runtime key was rotated
	// (contextosd keys rotate) and the operator signs what happened.
	ResolutionRotated = "rotated"
)

// IntegrityResolved records an operator's resolution of an integrity
// incident: what was done (Resolution), the operator's signed statement of
// what happened and the ticket or record behind it. It is the only event
// that lets proposals through again.
type IntegrityResolved struct {
	Operator    string `json:"operator"`
	Resolution  string `json:"resolution"`
	ArtifactRef string `json:"artifact_ref"`
	Statement   string `json:"statement"`
	Incident    int    `json:"incident"` // the incident resolved (LogIntegrity.Incidents at the time); 0: none was open
}

// EventType implements Event.
func (IntegrityResolved) EventType() string { return TypeIntegrityResolved }

func init() {
	register[IntegrityFailed](TypeIntegrityFailed)
	register[IntegrityResolved](TypeIntegrityResolved)
}

// LogIntegrity is the state of a tenant's integrity subject
// (ctx.ev.<tenant>.integrity).
type LogIntegrity struct {
	Open        *IntegrityFailed // the incident that stops dispatch; nil when none is open
	Incidents   int              // incidents recorded
	Resolutions int              // resolutions recorded
}

// Apply folds an integrity event.
func (l *LogIntegrity) Apply(ev Event) error {
	switch e := ev.(type) {
	case IntegrityFailed:
		if l.Open != nil {
			return fmt.Errorf("integrity incident recorded while incident %d is open", l.Incidents)
		}
		l.Open = &e
		l.Incidents++
	case IntegrityResolved:
		l.Open = nil
		l.Resolutions++
	default:
		return fmt.Errorf("event %T does not belong to an integrity subject", ev)
	}
	return nil
}

// WitnessPolicy says what a runtime does while its checkpoints lack a
// configured witness's cosignature. The zero value means no witness is
// configured.
type WitnessPolicy string

// Witness policies ([runtime] witness_policy).
const (
	WitnessWarn    WitnessPolicy = "warn"    // keep serving, loudly
	WitnessRequire WitnessPolicy = "require" // refuse proposals (CodeLogUnwitnessed)
)

// Witnessing is the runtime's live view of its witnesses for one tenant's
// log. The zero value is invalid.
type Witnessing int

// States of Witnessing.
const (
	_ Witnessing = iota
	// WitnessPending: the witnesses have not answered the boot check yet.
	WitnessPending
	// WitnessCosigned: every witness cosigned the latest checkpoint.
	WitnessCosigned
	// WitnessMissing: a witness did not cosign the latest checkpoint
	// (refused for a reason other than a shrink or fork, or did not answer).
	WitnessMissing
)

// WitnessStatus is what the proposal step knows of the witnesses: the
// policy and the state of the latest submission. Policy "" (no witness
// configured) lets every proposal through.
type WitnessStatus struct {
	Policy WitnessPolicy
	State  Witnessing
	Reason string // why the state is not WitnessCosigned
}

// CheckLogIntegrity is the proposal step's check of the log's integrity:
// an open incident refuses with CodeLogIntegrityFailed whatever the policy;
// a log whose witnesses have not answered the boot check refuses with
// CodeLogUnwitnessed under any policy (the check is what catches a history
// rewritten while the runtime was stopped), and one missing a cosignature
// refuses so under require only.
func CheckLogIntegrity(l *LogIntegrity, w WitnessStatus) *Refusal {
	if l != nil && l.Open != nil {
		return refuse(wire.CodeLogIntegrityFailed, "witness %s answered that the audit log %s (a checkpoint of %d records; it had cosigned %d): dispatch is stopped until an operator resolves incident %d",
			l.Open.Witness, l.Open.Kind, l.Open.LogSize, l.Open.WitnessSize, l.Incidents)
	}
	switch {
	case w.Policy == "":
	case w.State == WitnessPending:
		return refuse(wire.CodeLogUnwitnessed, "the witnesses have not yet answered the boot check of the audit log")
	case w.Policy == WitnessRequire && w.State != WitnessCosigned:
		return refuse(wire.CodeLogUnwitnessed, "the latest audit checkpoint lacks a witness's cosignature (witness_policy require): %s", w.Reason)
	}
	return nil
}

// FailIntegrity is a witness's refusal that shows the log shrank or forked.
type FailIntegrity struct {
	Witness     string
	Kind        string
	LogSize     int64
	WitnessSize int64
	Reason      string
	Executor    string
}

// DecideIntegrityFailure records an incident, unless one is open already
// (the next checkpoint of a forked log is refused too: one incident stands
// for them all until it is resolved).
func DecideIntegrityFailure(l *LogIntegrity, c FailIntegrity) Decision {
	if c.Witness == "" || (c.Kind != IntegrityShrank && c.Kind != IntegrityForked) || c.LogSize < 0 || c.WitnessSize < 0 {
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "an integrity failure names its witness and kind (shrank or forked)")}
	}
	if l.Open != nil {
		return Decision{}
	}
	return Decision{Events: []Event{IntegrityFailed{Witness: c.Witness, Kind: c.Kind, LogSize: c.LogSize, WitnessSize: c.WitnessSize,
		Reason: clipBytes(c.Reason, 512), Executor: c.Executor}}}
}

// ResolveIntegrity is an operator's resolution of an integrity incident.
type ResolveIntegrity struct {
	Operator    string
	Resolution  string
	ArtifactRef string
	Statement   string
}

// DecideResolveIntegrity records an operator's resolution. It needs the
// resolution (restored or rotated), an artifact reference and a statement
// of what happened; with no incident open it is recorded all the same (an
// operator who restored the streams records the incident the restored log
// no longer holds), and lets nothing through that was not already.
func DecideResolveIntegrity(l *LogIntegrity, c ResolveIntegrity) Decision {
	switch {
	case c.Operator == "":
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "a resolution names its operator")}
	case c.Resolution != ResolutionRestored && c.Resolution != ResolutionRotated:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "resolution %q: want %s or %s", clipBytes(c.Resolution, 64), ResolutionRestored, ResolutionRotated)}
	case c.ArtifactRef == "" || c.Statement == "":
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "a resolution needs an artifact reference and a statement of what happened")}
	case len(c.ArtifactRef) > 256 || len(c.Statement) > 4096:
		return Decision{Refusal: refuse(wire.CodeRequestMalformed, "artifact reference longer than 256 bytes or statement longer than 4096")}
	}
	incident := 0
	if l.Open != nil {
		incident = l.Incidents
	}
	return Decision{Events: []Event{IntegrityResolved{Operator: c.Operator, Resolution: c.Resolution, ArtifactRef: c.ArtifactRef,
		Statement: c.Statement, Incident: incident}}}
}

// clipBytes bounds a string recorded from another party's answer.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
