package projections

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// MaxOutcomeWindows is how many calendar windows of denials the model keeps
// per guarantee (the newest); the ledgers keep the rest of the report.
const MaxOutcomeWindows = 64

// pinInfo is what the report needs of a pinned guarantee: the capabilities
// whose refusals it counts, and its calendar window.
type pinInfo struct {
	Capabilities []string `json:"capabilities"`
	Window       string   `json:"window,omitempty"`
	TimeZone     string   `json:"time_zone,omitempty"`
}

// outcomeState is what the model keeps for the report besides the
// ledgers: the pins, and the denials by guarantee, window and code. Its
// size is bounded by the configuration (guarantees, capabilities), the code
// catalog and MaxOutcomeWindows, never by what agents send.
type outcomeState struct {
	Pins    map[string]pinInfo                        `json:"pins,omitempty"`
	Denials map[string]map[string]map[wire.Code]int64 `json:"denials,omitempty"` // guarantee -> window -> code -> count
}

// applyPinned remembers a pinned guarantee.
func (o *outcomeState) applyPinned(e kernel.GuaranteePinned) {
	if o.Pins == nil {
		o.Pins = map[string]pinInfo{}
	}
	d := e.Definition
	o.Pins[d.ID] = pinInfo{Capabilities: slices.Clone(d.CapabilityIDs), Window: d.Window, TimeZone: d.TimeZone}
}

// deny counts n refusals of code of a proposal of capability, at the
// envelope's time, on every guarantee that covers the capability.
func (o *outcomeState) deny(capability string, code wire.Code, n int64, at string) {
	if capability == "" || code == "" || n <= 0 || !slices.Contains(wire.Codes, code) {
		return
	}
	t, _ := time.Parse(codec.TimeLayout, at)
	for id, p := range o.Pins {
		if !slices.Contains(p.Capabilities, capability) {
			continue
		}
		def := kernel.Definition{ID: id, Window: p.Window}
		var window string
		if def.Calendar() {
			window = def.WindowAt(zone(p.TimeZone), t).Key
		}
		if o.Denials == nil {
			o.Denials = map[string]map[string]map[wire.Code]int64{}
		}
		ws := o.Denials[id]
		if ws == nil {
			ws = map[string]map[wire.Code]int64{}
			o.Denials[id] = ws
		}
		if ws[window] == nil {
			ws[window] = map[wire.Code]int64{}
			for len(ws) > MaxOutcomeWindows {
				oldest := ""
				for k := range ws {
					if oldest == "" || k < oldest {
						oldest = k
					}
				}
				delete(ws, oldest)
			}
		}
		if c := ws[window]; c != nil {
			c[code] += n
		}
	}
}

var zones sync.Map // time zone name -> *time.Location

// zone loads a guarantee's time zone (UTC when it has none or it does not
// load: the configuration refused such a zone at boot).
func zone(name string) *time.Location {
	if name == "" {
		return time.UTC
	}
	if z, ok := zones.Load(name); ok {
		return z.(*time.Location)
	}
	z, err := time.LoadLocation(name)
	if err != nil {
		z = time.UTC
	}
	zones.Store(name, z)
	return z
}

// outcomeOf returns what the report counts of an event besides the
// ledgers (a pin, a refused operation, an aggregated refusal), to fold once
// the event itself folded; nil for any other event. It reads the state
// before the event: a refused operation is let go once it folds.
func outcomeOf(ts *tenantState, kind string, s events.Stored, ev kernel.Event) func() {
	switch e := ev.(type) {
	case kernel.GuaranteePinned:
		if kind == "guarantee" {
			return func() { ts.Outcomes.applyPinned(e) }
		}
	case kernel.OperationRefused:
		var capability string
		if o := ts.Ops[s.Subject]; o != nil && kind == "operation" {
			capability = o.Op.CapabilityID
		}
		return func() { ts.Outcomes.deny(capability, e.Code, 1, s.Envelope.Time) }
	case kernel.ProposalRefused:
		n := int64(e.Count)
		if n <= 0 {
			n = 1
		}
		return func() { ts.Outcomes.deny(e.CapabilityID, e.Code, n, s.Envelope.Time) }
	}
	return nil
}

// outcomeKey is one row of the report.
type outcomeKey struct{ guarantee, window string }

// Outcomes computes the outcomes of tenant per guarantee and window (of one
// guarantee when guaranteeID is set) from the model: applied attempts and
// their amount, open attempts pending or unknown, open exposure by its age
// at now, and imported exposure from the ledgers; denials by code from the
// refusals folded. Rows are sorted by guarantee, then window.
func (m *Model) Outcomes(tenant, guaranteeID string, now time.Time) []wire.OutcomeRow {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return nil
	}
	rows := map[outcomeKey]*wire.OutcomeRow{}
	row := func(g, w string) *wire.OutcomeRow {
		k := outcomeKey{g, w}
		r := rows[k]
		if r == nil {
			r = &wire.OutcomeRow{GuaranteeID: g, Window: w, Stranded: emptyStranded()}
			rows[k] = r
		}
		return r
	}
	for _, l := range ts.Ledgers {
		if l.GuaranteeID == "" || (guaranteeID != "" && l.GuaranteeID != guaranteeID) {
			continue
		}
		r := row(l.GuaranteeID, l.Window)
		r.Applied += l.Archived.Committed
		r.AppliedAmount += l.Archived.CommittedAmount
		r.Imported += l.Imported
		for _, rc := range l.Receipts {
			switch {
			case rc.State == kernel.StateCommitted:
				r.Applied++
				r.AppliedAmount += rc.Amount
			case rc.State.Open():
				switch rc.Last {
				case kernel.OutcomePending, kernel.OutcomePartial:
					r.Pending++
				case kernel.OutcomeUnknown:
					r.Unknown++
				}
				b := &r.Stranded[ageBucket(now.Sub(ts.reservedAt(rc.AttemptID, now)))]
				b.Attempts++
				b.Amount += rc.Amount
			}
		}
	}
	for g, ws := range ts.Outcomes.Denials {
		if guaranteeID != "" && g != guaranteeID {
			continue
		}
		for w, codes := range ws {
			r := row(g, w)
			for c, n := range codes {
				r.Denials = append(r.Denials, wire.DenialCount{Code: c, Count: n})
			}
			slices.SortFunc(r.Denials, func(a, b wire.DenialCount) int { return strings.Compare(string(a.Code), string(b.Code)) })
		}
	}
	out := make([]wire.OutcomeRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b wire.OutcomeRow) int {
		if c := strings.Compare(a.GuaranteeID, b.GuaranteeID); c != 0 {
			return c
		}
		return strings.Compare(a.Window, b.Window)
	})
	return out
}

func emptyStranded() []wire.StrandedBucket {
	out := make([]wire.StrandedBucket, len(wire.AgeBuckets))
	for i, a := range wire.AgeBuckets {
		out[i].Age = a
	}
	return out
}

// ageBucket is the index in wire.AgeBuckets of an open attempt's age.
func ageBucket(age time.Duration) int {
	switch {
	case age < time.Minute:
		return 0
	case age < time.Hour:
		return 1
	case age < 24*time.Hour:
		return 2
	}
	return 3
}

// reservedAt is when an open attempt was reserved (its operation's
// envelope time), or now when the model does not know.
func (ts *tenantState) reservedAt(attemptID string, now time.Time) time.Time {
	if o := ts.Ops[ts.Attempts[attemptID]]; o != nil {
		if t, ok := o.ReservedAt[attemptID]; ok && !t.IsZero() {
			return t
		}
	}
	return now
}

// OutcomeTotals sums the outcome rows of tenant per guarantee over every
// window (Window empty), sorted by guarantee: what the metrics export.
func (m *Model) OutcomeTotals(tenant string, now time.Time) []wire.OutcomeRow {
	var out []wire.OutcomeRow
	for _, r := range m.Outcomes(tenant, "", now) {
		if n := len(out); n == 0 || out[n-1].GuaranteeID != r.GuaranteeID {
			out = append(out, wire.OutcomeRow{GuaranteeID: r.GuaranteeID, Stranded: emptyStranded()})
		}
		s := &out[len(out)-1]
		s.Applied += r.Applied
		s.AppliedAmount += r.AppliedAmount
		s.Pending += r.Pending
		s.Unknown += r.Unknown
		s.Imported += r.Imported
		for _, d := range r.Denials {
			i := slices.IndexFunc(s.Denials, func(x wire.DenialCount) bool { return x.Code == d.Code })
			if i < 0 {
				s.Denials = append(s.Denials, d)
				continue
			}
			s.Denials[i].Count += d.Count
		}
		for i, st := range r.Stranded {
			s.Stranded[i].Attempts += st.Attempts
			s.Stranded[i].Amount += st.Amount
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Denials, func(a, b wire.DenialCount) int { return strings.Compare(string(a.Code), string(b.Code)) })
	}
	return out
}
