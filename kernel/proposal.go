package kernel

// What a proposal holds: the guarantees it binds (ProposeStep reserves
// them, SettleStep and ReleaseStep settle and release them).

// Hold is one guarantee a proposal binds: the resource ledger it reserves on
// and what it reserves.
type Hold struct {
	GuaranteeID      string
	DefinitionDigest string
	Resource         string
	Amount           int64
	Limit            int64
	Observe          bool   // the guarantee is in observe mode: over the limit is recorded, not refused
	Window           string // the calendar window of the ledger (Definition.WindowAt), if any
	Rolling          int64  // the rolling window's duration in seconds, if any
	// Carried is what the guarantees this one replaces hold and committed
	// on the resource; ProposeStep sets it from their ledgers.
	Carried int64
}
