package kernel

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
)

// TypeExposureImported is exposure committed before the ledger was adopted,
// recorded by an operator.
const TypeExposureImported = "exposure.imported"

// MaxImports bounds the imports one resource ledger records: each keeps its
// reference, so that importing the same file again adds nothing.
const MaxImports = 256

// MaxImportReference bounds an import's reference, in bytes.
const MaxImportReference = 256

// ExposureImported counts Amount as committed on the resource: an effect
// that happened before the ledger existed (a refund paid before adoption),
// attributed to the operator who imported it and to the reference of its
// source record. It is stored on the resource's exposure subject like a
// reservation, so every replica and the offline replay count it.
type ExposureImported struct {
	GuaranteeID      string `json:"guarantee_id"`
	Resource         string `json:"resource"`
	Reference        string `json:"reference"`
	Amount           int64  `json:"amount"`
	Limit            int64  `json:"limit"`
	DefinitionDigest string `json:"definition_digest"`
	Window           string `json:"window,omitempty"`
	Rolling          int64  `json:"rolling_seconds,omitempty"`
	Operator         string `json:"operator"`
	// At is the decision time (RFC 3339): a rolling window counts the
	// import as committed then.
	At string `json:"at"`
}

// EventType implements Event.
func (ExposureImported) EventType() string { return TypeExposureImported }

func init() { register[ExposureImported](TypeExposureImported) }

// ImportRecord is one import a ledger keeps, by its reference.
type ImportRecord struct {
	Reference string `json:"reference"`
	Amount    int64  `json:"amount"`
	Operator  string `json:"operator"`
}

// Import asks to count exposure committed before adoption on one resource
// ledger. The runtime fills the definition's fields (limit, digest, window)
// from the pinned guarantee's latest version, as for a reservation.
type Import struct {
	GuaranteeID      string
	Resource         string
	Reference        string
	Amount           int64
	Limit            int64
	DefinitionDigest string
	Window           string
	Rolling          int64
	Carried          int64
	Operator         string
	Now              time.Time
}

func (Import) command() {}

// decideImport decides an import. It is refused, like a reservation, when
// it would take the resource over its limit: the ceiling's invariant
// (committed + held <= limit) holds for imports too, so an operator whose
// prior exposure exceeds the limit raises the limit first, on the record
// (docs/decisions.md). The same reference again with the same amount is a
// no-op, so a file imported twice counts once.
func decideImport(l *Ledger, c Import) Decision {
	switch {
	case c.Operator == "":
		return no(wire.CodeRequestMalformed, "an import must name its operator")
	case c.Reference == "" || len(c.Reference) > MaxImportReference:
		return no(wire.CodeRequestMalformed, "an import needs a reference of 1..%d bytes", MaxImportReference)
	case c.Resource == "":
		return no(wire.CodeResourceInvalid, "an import needs a resource")
	}
	if l.DefinitionDigest != "" && l.DefinitionDigest != c.DefinitionDigest {
		return no(wire.CodeDefinitionMismatch, "resource ledger is pinned to definition %s, not %s", short(l.DefinitionDigest), short(c.DefinitionDigest))
	}
	if c.Limit <= 0 || c.Limit > MaxAmount {
		return no(wire.CodeDefinitionInvalid, "limit %d must be in 1..2^53-1", c.Limit)
	}
	if l.Limit != 0 && (l.Window != c.Window || l.Rolling != c.Rolling) {
		return no(wire.CodeDefinitionMismatch, "resource ledger counts window %q (rolling %ds), not %q (rolling %ds)", l.Window, l.Rolling, c.Window, c.Rolling)
	}
	if c.Amount <= 0 || c.Amount > MaxAmount {
		return no(wire.CodeAmountInvalid, "amount %d must be in 1..2^53-1", c.Amount)
	}
	for _, r := range l.Imports {
		if r.Reference != c.Reference {
			continue
		}
		if r.Amount == c.Amount {
			return Decision{} // imported already: a re-run adds nothing
		}
		return no(wire.CodeImportConflict, "reference %s was imported with amount %d, not %d", c.Reference, r.Amount, c.Amount)
	}
	if len(l.Imports) >= MaxImports {
		return no(wire.CodeImportsSaturated, "resource has %d imports, the maximum; import one total per resource instead", len(l.Imports))
	}
	if c.Carried < 0 {
		return no(wire.CodeAmountInvalid, "carried exposure %d is negative", c.Carried)
	}
	committed := l.Committed
	if c.Rolling > 0 {
		committed = l.CommittedAt(c.Now)
	}
	if committed+l.Held+c.Carried+c.Amount > c.Limit {
		return no(wire.CodeExceeded, "%s: importing %d over committed %d + held %d + carried %d exceeds limit %d (available %d); raise the limit first if the prior exposure is real",
			c.GuaranteeID, c.Amount, committed, l.Held, c.Carried, c.Limit, c.Limit-committed-l.Held-c.Carried)
	}
	return Decision{Events: []Event{ExposureImported{GuaranteeID: c.GuaranteeID, Resource: c.Resource, Reference: c.Reference,
		Amount: c.Amount, Limit: c.Limit, DefinitionDigest: c.DefinitionDigest, Window: c.Window, Rolling: c.Rolling,
		Operator: c.Operator, At: formatAt(c.Now)}}}
}

// applyImported folds an import: its amount joins Committed (and, for a
// rolling window, the bucket of its decision time).
func (l *Ledger) applyImported(e ExposureImported) error {
	if l.Limit != 0 && (e.Resource != l.Resource || e.GuaranteeID != l.GuaranteeID || e.DefinitionDigest != l.DefinitionDigest ||
		e.Window != l.Window || e.Rolling != l.Rolling) {
		return fmt.Errorf("import %s belongs to another ledger or definition", e.Reference)
	}
	at, err := parseAt(e.At)
	if err != nil || e.At == "" || e.Rolling < 0 {
		return fmt.Errorf("import %s has an invalid decision time or window", e.Reference)
	}
	if e.Reference == "" || len(e.Reference) > MaxImportReference || e.Operator == "" {
		return fmt.Errorf("import %q has no valid reference or operator", e.Reference)
	}
	for _, r := range l.Imports {
		if r.Reference == e.Reference {
			return fmt.Errorf("import %s recorded twice", e.Reference)
		}
	}
	if len(l.Imports) >= MaxImports {
		return fmt.Errorf("import %s exceeds %d imports", e.Reference, MaxImports)
	}
	committed := l.Committed
	if e.Rolling > 0 {
		gone, _ := l.expired(at)
		committed -= gone
	}
	if e.Limit <= 0 || e.Limit > MaxAmount || e.Amount <= 0 || e.Amount > MaxAmount || committed+l.Held+e.Amount > e.Limit {
		return fmt.Errorf("import %s of %d breaks the ceiling %d (committed %d, held %d)", e.Reference, e.Amount, e.Limit, l.Committed, l.Held)
	}
	l.GuaranteeID, l.Resource, l.Limit, l.DefinitionDigest, l.Window, l.Rolling = e.GuaranteeID, e.Resource, e.Limit, e.DefinitionDigest, e.Window, e.Rolling
	l.Imports = append(l.Imports, ImportRecord{Reference: e.Reference, Amount: e.Amount, Operator: e.Operator})
	l.Imported += e.Amount
	l.Committed += e.Amount
	if l.Rolling > 0 {
		l.Committed -= e.Amount // commitAt's bucket counts it, after what expired leaves
		l.expire(at)
		l.Committed += e.Amount
		l.commitAt(at, e.Amount)
	}
	return nil
}

// ImportState is what an import of one row reads: the guarantee's pin, the
// tenant's control subject (the guarantee's latest limit and what it
// replaces), the resource ledger it appends to, and the ledgers of the
// guarantees it replaces on the same resource, which count against its
// limit.
type ImportState struct {
	Pin      *Pin
	Control  *Control
	Ledger   *Ledger
	Replaced map[LedgerKey]*Ledger
}

// ImportRow asks to import one row of prior exposure.
type ImportRow struct {
	GuaranteeID string
	Resource    string
	Window      string // the calendar window's key (2026-12-05, 2026-W49, 2026-12); "" otherwise
	Amount      int64
	Reference   string
	Operator    string
	Now         time.Time
}

// CheckImportRow refuses a row that names no resource, before anything is
// read: the resource names the ledger the row is decided on.
func CheckImportRow(c ImportRow) *Refusal {
	if c.Resource == "" {
		return refuse(wire.CodeResourceInvalid, "the row names no resource")
	}
	return nil
}

// DecideImportRow is the governed step of an import: the pinned guarantee,
// the row's window against its definition, the guarantee's latest limit
// and the exposure the guarantees it replaces carry, then the ledger's
// import decision (decideImport).
func DecideImportRow(s ImportState, c ImportRow) Decision {
	p := s.Pin
	switch {
	case !p.Pinned():
		return no(wire.CodeDefinitionMismatch, "guarantee %s is not pinned; it is pinned at its first use or at boot", c.GuaranteeID)
	case c.GuaranteeID != p.Definition.ID:
		return no(wire.CodeRequestMalformed, "guarantee %s is not %s", c.GuaranteeID, p.Definition.ID)
	}
	if r := p.Definition.CheckWindowKey(c.Window); r != nil {
		return Decision{Refusal: r}
	}
	h := s.Control.Bind(p.PinnedHold(c.Resource, c.Amount))
	h.Window = c.Window
	carried, r := s.Control.carried(h, s.Replaced, c.Now)
	if r != nil {
		return Decision{Refusal: r}
	}
	l := s.Ledger
	if l == nil {
		l = &Ledger{}
	}
	return decideImport(l, Import{GuaranteeID: h.GuaranteeID, Resource: c.Resource, Reference: c.Reference, Amount: c.Amount,
		Limit: h.Limit, DefinitionDigest: h.DefinitionDigest, Window: h.Window, Rolling: h.Rolling, Carried: carried,
		Operator: c.Operator, Now: c.Now})
}

// CheckWindowKey refuses a window key that is not one of the definition's
// calendar windows: a calendar guarantee's import names the window it
// counts in, any other names none.
func (d Definition) CheckWindowKey(key string) *Refusal {
	if !d.Calendar() {
		if key != "" {
			return refuse(wire.CodeRequestMalformed, "guarantee %s has no calendar window; the window must be empty", d.ID)
		}
		return nil
	}
	var t time.Time
	var err error
	switch d.Window {
	case WindowDay:
		t, err = time.Parse("2006-01-02", key)
	case WindowMonth:
		t, err = time.Parse("2006-01", key)
	case WindowWeek:
		var y, w int
		var rest string
		n, _ := fmt.Sscanf(key+" x", "%04d-W%02d %s", &y, &w, &rest)
		if n != 3 || w < 1 || w > 53 || fmt.Sprintf("%04d-W%02d", y, w) != key {
			err = fmt.Errorf("not a week")
		}
		// A week's key must be one WindowAt makes: its Thursday is in
		// year y (ISO 8601).
		if err == nil {
			jan4 := time.Date(y, 1, 4, 0, 0, 0, 0, time.UTC)
			thu := jan4.AddDate(0, 0, (w-1)*7+(3-(int(jan4.Weekday())+6)%7))
			if yy, ww := thu.ISOWeek(); yy != y || ww != w {
				err = fmt.Errorf("no such week")
			}
		}
	}
	if err != nil || (d.Window != WindowWeek && t.Format(map[string]string{WindowDay: "2006-01-02", WindowMonth: "2006-01"}[d.Window]) != key) {
		return refuse(wire.CodeRequestMalformed, "guarantee %s counts %s windows; window %q is not one (e.g. %s)", d.ID, d.Window, key,
			map[string]string{WindowDay: "2026-12-05", WindowWeek: "2026-W49", WindowMonth: "2026-12"}[d.Window])
	}
	return nil
}
