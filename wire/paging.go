package wire

// Paging of the list verbs (exposure, attempts, approvals, incidents,
// guarantee-history). A request names limit (rows per page, 0 or absent:
// DefaultPageLimit, at most MaxPageLimit) and cursor (absent: the first
// page; else the next_cursor of the page before). A reply carries
// next_cursor when rows remain. A cursor is opaque: send it back as it
// came. A page also stops before its encoding passes the reply budget
// (half the server's max_payload, at most MaxReplyBudget).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 500
	// MaxCursorBytes bounds a cursor's text.
	MaxCursorBytes = 1024
	// MaxReplyBudget bounds the rows of a page in bytes, whatever the
	// server's max_payload.
	MaxReplyBudget = 512 << 10
)

// Paging of the export verbs (ExportRequest).
const (
	DefaultExportLimit = 256
	MaxExportLimit     = 4096
)
