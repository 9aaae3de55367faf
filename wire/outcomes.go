package wire

// Bounds of an import of prior exposure (guarantee-import).
const (
	// MaxImportRows is the most rows one request carries.
	MaxImportRows = 1000
	// MaxImportFileBytes is the largest file ctx guarantee import reads.
	MaxImportFileBytes = 512 * 1024
)

// ImportRow is one row of prior exposure: Amount (in the guarantee's unit)
// committed on Resource before the guarantee was adopted, in the calendar
// window Window (its key, as in exposure rows) for a guarantee that has
// one. Reference names the source record (a payment id, a ledger line):
// a reference is imported once per resource ledger.
type ImportRow struct {
	GuaranteeID string `json:"guarantee_id"`
	Resource    string `json:"resource"`
	Window      string `json:"window,omitempty"`
	Amount      int64  `json:"amount"`
	Reference   string `json:"reference"`
}

// ImportRequest is the body of guarantee-import: at most MaxImportRows
// rows, each decided on its own.
type ImportRequest struct {
	Rows []ImportRow `json:"rows"`
}

// Import statuses of a row.
const (
	ImportImported = "imported"         // recorded now
	ImportAlready  = "already_imported" // its reference was recorded before with the same amount
	ImportRefused  = "refused"          // Code says why; nothing was recorded
)

// ImportResult is what guarantee-import did with one row (Row counts from
// 1).
type ImportResult struct {
	Row       int    `json:"row"`
	Reference string `json:"reference"`
	Status    string `json:"status"`
	Code      Code   `json:"code,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Stranded exposure age buckets, by the time since the attempt was
// reserved.
const (
	AgeUnderMinute = "lt_1m"
	AgeUnderHour   = "1m_1h"
	AgeUnderDay    = "1h_1d"
	AgeOverDay     = "ge_1d"
)

// AgeBuckets lists the age buckets in order.
var AgeBuckets = []string{AgeUnderMinute, AgeUnderHour, AgeUnderDay, AgeOverDay}

// StrandedBucket is the exposure open attempts hold, of one age.
type StrandedBucket struct {
	Age      string `json:"age"`
	Attempts int64  `json:"attempts"`
	Amount   int64  `json:"amount"`
}

// DenialCount is how many proposals a code refused.
type DenialCount struct {
	Code  Code  `json:"code"`
	Count int64 `json:"count"`
}

// OutcomeRow is what one guarantee did in one window (Window "" for a
// guarantee without calendar windows): attempts applied and their amount,
// proposals denied by code, attempts still pending or unknown, the open
// exposure by age (Stranded), and the prior exposure imported.
type OutcomeRow struct {
	GuaranteeID   string           `json:"guarantee_id"`
	Window        string           `json:"window,omitempty"`
	Applied       int64            `json:"applied"`
	AppliedAmount int64            `json:"applied_amount"`
	Denials       []DenialCount    `json:"denials,omitempty"`
	Pending       int64            `json:"pending"`
	Unknown       int64            `json:"unknown"`
	Stranded      []StrandedBucket `json:"stranded"`
	Imported      int64            `json:"imported_amount,omitempty"`
}

// ReportRequest is the body of report: one guarantee, or all.
type ReportRequest struct {
	GuaranteeID string `json:"guarantee_id,omitempty"`
}
