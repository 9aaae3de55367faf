package wire

// Status is what a decision reply says about an operation. The zero value is
// invalid.
type Status string

// Statuses of a decision reply (DESIGN section 5).
const (
	StatusRefused    Status = "refused"
	StatusApplied    Status = "applied"
	StatusNotApplied Status = "not_applied"
	StatusPending    Status = "pending"
	StatusUnknown    Status = "unknown"
)

// Outcome is what a provider reported about an attempt, as the operator
// views show it (an attempt's last observation, what a settlement
// recorded). The kernel's observation events carry the same strings
// (kernel.Outcome; TestMirrors holds the two together).
type Outcome string

// Outcomes. Applied and NotApplied are definitive; the others keep an
// attempt's hold.
const (
	OutcomeApplied    Outcome = "applied"
	OutcomeNotApplied Outcome = "not_applied"
	OutcomePending    Outcome = "pending"
	OutcomeUnknown    Outcome = "unknown"
	OutcomePartial    Outcome = "partial"
)
