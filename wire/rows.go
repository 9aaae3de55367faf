package wire

import (
	"encoding/json"
	"time"
)

// ExposureRow is one resource's balances in the operator view.
type ExposureRow struct {
	Tenant      string `json:"tenant"`
	GuaranteeID string `json:"guarantee_id"`
	Resource    string `json:"resource"`
	// ResourceDigest is set when Resource is shown shortened (Shorten).
	ResourceDigest string `json:"resource_digest,omitempty"`
	OpenAttempts   int    `json:"open_attempts"`
	Balance
	// Window is the calendar window this ledger counts (a day, an ISO week
	// or a month in the guarantee's time zone); capacity returns when it
	// ends.
	Window string `json:"window,omitempty"`
	// ReturnsAt and Returns say when a rolling window's oldest committed
	// amount leaves it, and how much; Balance.Committed is what the window
	// counts at the time of the read.
	ReturnsAt time.Time `json:"capacity_returns_at,omitzero"`
	Returns   int64     `json:"capacity_returns,omitempty"`
	// Archived summarizes the sealed receipts the ledger no longer lists.
	Archived ArchivedReceipts `json:"archived_receipts,omitzero"`
	// OverLimit counts reservations made over the limit in observe mode.
	OverLimit int64 `json:"over_limit,omitempty"`
}

// AttemptRow is an open attempt with its next safe step. It carries no tool
// arguments.
type AttemptRow struct {
	AttemptID   string  `json:"attempt_id"`
	OperationID string  `json:"operation_id"`
	Principal   string  `json:"principal"`
	RunID       string  `json:"run_id"`
	GuaranteeID string  `json:"guarantee_id"`
	Resource    string  `json:"resource"`
	Amount      int64   `json:"amount"`
	State       string  `json:"state"`
	Last        Outcome `json:"last_observation,omitempty"`
	// Set when the fields they name are shown shortened (Shorten).
	ResourceDigest   string `json:"resource_digest,omitempty"`
	RunIDDigest      string `json:"run_id_digest,omitempty"`
	LastReasonDigest string `json:"last_reason_digest,omitempty"`
	// LastReason is what the last observation recorded: the provider's
	// state, or why it could not answer ("provider unreachable: ...").
	LastReason string `json:"last_reason,omitempty"`
	NextStep   string `json:"next_safe_step"`
	// ReservedAt is when the attempt was reserved (its event's time).
	ReservedAt time.Time `json:"reserved_at,omitzero"`
}

// PendingApproval is a proposal refused approval_required that no approval
// or denial of its action digest answered yet: what an operator is asked
// to approve.
type PendingApproval struct {
	OperationID  string          `json:"operation_id"`
	OperationKey string          `json:"operation_key"`
	RunID        string          `json:"run_id"`
	Principal    string          `json:"principal"`
	CapabilityID string          `json:"capability_id"`
	ActionDigest string          `json:"action_digest"`
	Arguments    json.RawMessage `json:"arguments"`
	RequestedAt  string          `json:"requested_at"`
	// Set when the fields they name are shown shortened (Shorten,
	// ShortenJSON): the digest of the whole value (for the arguments, of
	// their canonical encoding as proposed).
	OperationKeyDigest string `json:"operation_key_digest,omitempty"`
	RunIDDigest        string `json:"run_id_digest,omitempty"`
	ArgumentsDigest    string `json:"arguments_digest,omitempty"`
	// ArgumentsBytes is set when the arguments are left out (null) because
	// even shortened they pass MaxShownArguments: their size as proposed.
	ArgumentsBytes int `json:"arguments_bytes,omitempty"`
	// Seq is the stream sequence of the refusal that asked for the
	// approval: the list's order and its cursor's key.
	Seq uint64 `json:"-"`
}

// Incident is one incident as operators see it (ctx incidents): a
// contradicting observation, a fenced executor, exhausted contention, or a
// stored event the model refused.
type Incident struct {
	Kind        string `json:"kind"`
	AttemptID   string `json:"attempt_id"`
	OperationID string `json:"operation_id"`
	Code        Code   `json:"code"`
	Reason      string `json:"reason"`
	At          string `json:"at"`
	// ReasonDigest is set when Reason is shown shortened (Shorten).
	ReasonDigest string `json:"reason_digest,omitempty"`
	// Key is the incident's place in the list, oldest first: the stream
	// sequence of its event (for an incident this replica reported, the
	// model's sequence then) and 0 (for a reported one, its number). Every
	// replica folding the same stream gives the stream's incidents the same
	// keys, so a page's cursor means the same to each.
	Key IncidentKey `json:"-"`
}

// IncidentKey orders the incidents of a tenant.
type IncidentKey struct {
	Seq uint64 `json:"seq"`
	N   uint64 `json:"n,omitempty"`
}

// ArchivedReceipts is the accounted summary of the sealed receipts a ledger
// no longer lists: how many committed and with what amount, how many were
// released. The archived committed amount stays in Committed. It has
// kernel.ArchivedReceipts' fields (TestMirrors).
type ArchivedReceipts struct {
	Committed       int64 `json:"committed"`
	CommittedAmount int64 `json:"committed_amount"`
	Released        int64 `json:"released"`
}

// VersionRow is one version of a guarantee: version 1 is its pin.
type VersionRow struct {
	Version  uint64 `json:"version"`
	At       string `json:"at,omitempty"`
	Operator string `json:"operator,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Resource string `json:"resource,omitempty"`
	Limit    int64  `json:"limit,omitempty"`
	Mode     string `json:"mode,omitempty"`
	// Set when Resource or Reason is shown shortened.
	ResourceDigest string `json:"resource_digest,omitempty"`
	ReasonDigest   string `json:"reason_digest,omitempty"`
}

// BreakerRow is one capability's breaker: its rule, and the figures that
// tripped it while it is open.
type BreakerRow struct {
	CapabilityID string       `json:"capability_id"`
	Open         bool         `json:"open"`
	Threshold    int          `json:"threshold"`
	WindowMillis int64        `json:"window_ms"`
	Trip         *BreakerTrip `json:"trip,omitempty"`
}

// BreakerTrip is what tripped a breaker. It has kernel.BreakerTripped's
// fields (TestMirrors).
type BreakerTrip struct {
	CapabilityID string `json:"capability_id"`
	Failures     int    `json:"failures"`      // failures within the window when it tripped
	Threshold    int    `json:"threshold"`     // the rule's threshold
	WindowMillis int64  `json:"window_ms"`     // the rule's window
	FirstFailure string `json:"first_failure"` // the oldest failure counted (RFC 3339)
	LastFailure  string `json:"last_failure"`  // the failure that tripped it (RFC 3339)
	LastReason   string `json:"last_reason"`   // what the provider said then
}

// Run is a run's budget (the data of the run and admit-run verbs). It has
// kernel.Run's fields (TestMirrors).
type Run struct {
	RunID           string   `json:"run_id"`
	ParentRunID     string   `json:"parent_run_id,omitempty"`
	Principal       string   `json:"principal,omitempty"`
	Admitted        bool     `json:"admitted"`
	Calls           int64    `json:"calls"`
	Amount          int64    `json:"amount"`
	UsedCalls       int64    `json:"used_calls"`
	UsedAmount      int64    `json:"used_amount"`
	DelegatedCalls  int64    `json:"delegated_calls"`
	DelegatedAmount int64    `json:"delegated_amount"`
	Children        []string `json:"children,omitempty"`
	Pack            *PackRef `json:"pack,omitempty"`
}

// PackRef names one published context pack version: its id, its version
// and the digest of its canonical form.
type PackRef struct {
	PackID  string `json:"pack_id"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// String is id@version.
func (r PackRef) String() string { return r.PackID + "@" + r.Version }

// AuthorityChange is the data of grant and revoke (Recorded is false when
// the authority already was so).
type AuthorityChange struct {
	Principal    string `json:"principal"`
	CapabilityID string `json:"capability_id"`
	Granted      bool   `json:"granted"`
	Recorded     bool   `json:"recorded"`
}

// Approval is the data of approve: the id a proposal names in approval_id.
type Approval struct {
	ApprovalID   string `json:"approval_id"`
	ActionDigest string `json:"action_digest"`
	Risk         string `json:"risk"`
	ExpiresAt    string `json:"expires_at"`
}

// Denial is the data of deny.
type Denial struct {
	ApprovalID   string `json:"approval_id"`
	ActionDigest string `json:"action_digest"`
	Risk         string `json:"risk"`
	Denied       bool   `json:"denied"`
	Reason       string `json:"reason"`
}

// IntegrityState is the data of the integrity verbs' replies.
type IntegrityState struct {
	Open        *IntegrityFailure `json:"open,omitempty"` // the incident stopping dispatch
	Incidents   int               `json:"incidents"`
	Resolutions int               `json:"resolutions"`
	Policy      string            `json:"witness_policy,omitempty"`
	Witnessing  string            `json:"witnessing,omitempty"` // pending, cosigned or missing
	Reason      string            `json:"reason,omitempty"`
}

// IntegrityFailure is an audit log integrity incident: a witness refused to
// cosign the log's checkpoint. It has kernel.IntegrityFailed's fields
// (TestMirrors).
type IntegrityFailure struct {
	Witness     string `json:"witness"`      // the witness's key name
	Kind        string `json:"kind"`         // shrank or forked
	LogSize     int64  `json:"log_size"`     // the size of the checkpoint the witness refused
	WitnessSize int64  `json:"witness_size"` // the size the witness had cosigned (0 when it did not say)
	Reason      string `json:"reason"`       // the witness's answer
	Executor    string `json:"executor"`     // the replica that met the refusal
}
