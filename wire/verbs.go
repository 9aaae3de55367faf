package wire

// Operator verbs named by constants (the others are spelt out where they
// are served and in docs/wire.md), the <verb> of OpSubject.
const (
	VerbApprovals = "approvals" // proposals refused approval_required, not yet approved
	VerbIncidents = "incidents" // contradicting observations, fenced executors, refused stored events
	VerbBreaker   = "breaker"   // list and reset circuit breakers

	VerbAuditExport      = "audit-export"      // records by index, paged
	VerbAuditCheckpoints = "audit-checkpoints" // signed checkpoints, paged
	VerbAuditKeys        = "audit-keys"        // keys.json
	VerbAuditProve       = "audit-prove"       // proof.json of one event's record
	// consistency.json: an older checkpoint is a prefix of the latest
	VerbAuditProveConsistency = "audit-prove-consistency"
	VerbEventsExport          = "events-export" // events.jsonl lines, paged
	VerbExposureView          = "exposure-view" // view.json
	// VerbGuaranteeImport records exposure committed before adoption
	// (ImportRequest; one ImportResult a row).
	VerbGuaranteeImport = "guarantee-import"
	// VerbReport reports outcomes per guarantee and window (OutcomeRow).
	VerbReport = "report"
	// VerbConfirm: a second operator confirms a request the tenant's
	// two-person rule held (ConfirmRequest).
	VerbConfirm = "confirm"

	// Context pack versions (docs/context.md, "Pack versions").
	VerbPacks        = "packs"         // the published versions and the promoted one
	VerbPackPublish  = "pack-publish"  // publish a version (PackPublishRequest)
	VerbPackPromote  = "pack-promote"  // promote a version through the release gate (PackPromoteRequest)
	VerbPackRollback = "pack-rollback" // re-promote the version promoted before the current one
)
