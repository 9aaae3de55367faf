package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/wire"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// ViewVersion is the version of the view.json format.
const ViewVersion = 1

// View is a tenant's exposure view: every resource ledger's balances and open
// attempts, and the incidents, after folding the tenant's events up to Seq.
// The live projection exports it as view.json (MarshalView: indented JSON,
// fields in this order) and Replay recomputes it offline from events.jsonl.
type View struct {
	V         int            `json:"v"`
	Tenant    string         `json:"tenant"`
	Seq       uint64         `json:"seq"`       // stream sequence of the last event of the tenant folded; 0 for none
	Resources []ResourceView `json:"resources"` // sorted by guarantee_id, resource, subject
	Incidents []Incident     `json:"incidents"` // stream order
}

// ResourceView is one resource ledger. The balances are kernel.Ledger.Balance.
type ResourceView struct {
	GuaranteeID string `json:"guarantee_id"` // "" while the ledger holds no reservation (tombstones only)
	Resource    string `json:"resource"`     // idem
	Subject     string `json:"subject"`
	Limit       int64  `json:"limit"`
	Committed   int64  `json:"committed"`
	Held        int64  `json:"held"`
	Available   int64  `json:"available"`
	Receipts    int    `json:"receipts"` // receipts listed: open ones and the newest sealed (at most kernel.MaxListed)
	// Archived summarizes the sealed receipts the ledger no longer lists.
	Archived     kernel.ArchivedReceipts `json:"archived_receipts,omitzero"`
	Window       string                  `json:"window,omitempty"`          // the calendar window this ledger counts
	Rolling      int64                   `json:"rolling_seconds,omitempty"` // the rolling window's duration
	OverLimit    int64                   `json:"over_limit,omitempty"`      // reservations over the limit in observe mode
	OpenAttempts []OpenAttempt           `json:"open_attempts"`             // receipts still holding exposure, in reservation order
}

// OpenAttempt is a receipt that still holds exposure, with the next safe step.
type OpenAttempt struct {
	AttemptID   string `json:"attempt_id"`
	OperationID string `json:"operation_id"`
	Amount      int64  `json:"amount"`
	State       string `json:"state"`          // reserved, started or held
	Last        string `json:"last,omitempty"` // the last observation, if any
	NextStep    string `json:"next_step"`
}

// Incident is an incident event: see IncidentCodes for which refusals
// count.
type Incident struct {
	Seq       uint64 `json:"seq"`
	EventID   string `json:"event_id"`
	Type      string `json:"type"`
	Time      string `json:"time"`
	Subject   string `json:"subject"`
	AttemptID string `json:"attempt_id,omitempty"`
	Kind      string `json:"kind,omitempty"` // the incident kind or refusal code, when the body names one
}

// The next safe step of an open attempt, by state (kernel.NextSafeStep).
const (
	NextStepReserved = kernel.NextStepReserved
	NextStepStarted  = kernel.NextStepStarted
	NextStepHeld     = kernel.NextStepHeld
)

// NextStep returns the next safe step of an attempt in state s ("" for a
// sealed one).
func NextStep(s kernel.ReceiptState) string { return s.NextSafeStep() }

// Fold builds one tenant's View by folding its events in stream order: events
// on an exposure subject ("ctx.ev.<tenant>.exposure.<guarantee>.<token>") are
// decoded with kernel.DecodeEvent and applied with kernel.Ledger.Apply to
// that subject's ledger; incidents are collected; other events only advance
// the sequence. It never computes a balance itself. Not safe for concurrent
// use.
type Fold struct {
	tenant    string
	seq       uint64
	ledgers   map[string]*kernel.Ledger
	incidents []Incident
}

// NewFold returns an empty fold of tenant's events.
func NewFold(tenant string) *Fold {
	return &Fold{tenant: tenant, ledgers: map[string]*kernel.Ledger{}}
}

// Seq returns the sequence of the last event applied (0 for none).
func (f *Fold) Seq() uint64 { return f.seq }

// Apply folds the event stored at seq on subject. Sequences must increase; an
// event of another tenant, an exposure event the kernel does not know or
// refuses (a corrupt or foreign stream), or a reservation whose guarantee and
// resource are not its subject's are errors, and leave the fold unchanged.
func (f *Fold) Apply(seq uint64, subject string, env codec.Envelope) error {
	if seq <= f.seq {
		return fmt.Errorf("verifier: fold: seq %d does not follow %d", seq, f.seq)
	}
	if env.Tenant != f.tenant || !strings.HasPrefix(subject, codec.TenantPrefix(f.tenant)) {
		return fmt.Errorf("verifier: fold: event %s of tenant %q on %q in the fold of %q", env.EventID, env.Tenant, subject, f.tenant)
	}
	if strings.HasPrefix(subject, codec.TenantPrefix(f.tenant)+codec.KindExposure+".") {
		if err := f.applyExposure(subject, env); err != nil {
			return fmt.Errorf("verifier: fold: seq %d event %s (%s) on %q: %w", seq, env.EventID, env.Type, subject, err)
		}
	}
	if in, ok := IncidentOf(seq, subject, env); ok {
		f.incidents = append(f.incidents, in)
	}
	f.seq = seq
	return nil
}

func (f *Fold) applyExposure(subject string, env codec.Envelope) error {
	ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
	if err != nil {
		return err
	}
	if err := CheckExposureSubject(f.tenant, subject, ev); err != nil {
		return err
	}
	l := f.ledgers[subject]
	if l == nil {
		l = &kernel.Ledger{}
	}
	if err := l.Apply(ev); err != nil {
		return err
	}
	f.ledgers[subject] = l
	return nil
}

// CheckExposureSubject refuses a reservation or an import stored on another subject than
// its guarantee's and resource's exposure subject of tenant.
func CheckExposureSubject(tenant, subject string, ev kernel.Event) error {
	var r kernel.ExposureReserved
	switch e := ev.(type) {
	case kernel.ExposureReserved:
		r = e
	case kernel.ExposureImported:
		r = kernel.ExposureReserved{GuaranteeID: e.GuaranteeID, Resource: e.Resource, Window: e.Window}
	default:
		return nil
	}
	want, err := codec.ExposureWindowSubject(tenant, r.GuaranteeID, r.Resource, r.Window)
	if err != nil {
		return err
	}
	if want != subject {
		return fmt.Errorf("reservation of %s/%q belongs on %q", r.GuaranteeID, r.Resource, want)
	}
	return nil
}

// IncidentCodes are the refusal codes that make a refusal event (a type
// ending in ".refused", such as operation.refused) an incident: contention
// exhausted, a fenced executor, an observation contradicting a seal.
var IncidentCodes = []wire.Code{wire.CodeContention, wire.CodeExecutorFenced, wire.CodeObservationContradictsSeal}

// IncidentOf returns the incident an event records, if it is one: an
// exposure.incident, any event whose type starts with "incident." or
// "refusal.", and a refusal event (type ending in ".refused") whose code is
// one of IncidentCodes.
func IncidentOf(seq uint64, subject string, env codec.Envelope) (Incident, bool) {
	incident := env.Type == kernel.TypeExposureIncident || strings.HasPrefix(env.Type, "incident.") || strings.HasPrefix(env.Type, "refusal.")
	// Every event of the stream passes here in the read model's fold: the
	// body is parsed only for a type that can make an incident.
	if !incident && !strings.HasSuffix(env.Type, ".refused") {
		return Incident{}, false
	}
	var body map[string]any
	_ = json.Unmarshal(env.Body, &body)
	kind, _ := body["kind"].(string)
	if kind == "" {
		kind, _ = body["code"].(string)
	}
	if !incident && !slices.Contains(IncidentCodes, wire.Code(kind)) {
		return Incident{}, false
	}
	attempt, _ := body["attempt_id"].(string)
	return Incident{Seq: seq, EventID: env.EventID, Type: env.Type, Time: env.Time, Subject: subject, AttemptID: attempt, Kind: kind}, true
}

// View returns the fold's current view.
func (f *Fold) View() View {
	v := View{V: ViewVersion, Tenant: f.tenant, Seq: f.seq, Resources: []ResourceView{}, Incidents: append([]Incident{}, f.incidents...)}
	for subject, l := range f.ledgers {
		v.Resources = append(v.Resources, ResourceOf(subject, l))
	}
	SortResources(v.Resources)
	return v
}

// ResourceOf returns the view of the ledger l folded from subject.
func ResourceOf(subject string, l *kernel.Ledger) ResourceView {
	b := l.Balance()
	rv := ResourceView{
		GuaranteeID: l.GuaranteeID, Resource: l.Resource, Subject: subject,
		Limit: b.Limit, Committed: b.Committed, Held: b.Held, Available: b.Available,
		Receipts: len(l.Receipts), Archived: l.Archived, Window: l.Window, Rolling: l.Rolling, OverLimit: l.OverLimit,
		OpenAttempts: []OpenAttempt{},
	}
	for _, r := range l.Receipts {
		if !r.State.Open() {
			continue
		}
		rv.OpenAttempts = append(rv.OpenAttempts, OpenAttempt{
			AttemptID: r.AttemptID, OperationID: r.OperationID, Amount: r.Amount,
			State: r.State.String(), Last: string(r.Last), NextStep: NextStep(r.State),
		})
	}
	return rv
}

// SortResources sorts resource views by guarantee id, resource and subject,
// the order of View.Resources.
func SortResources(rs []ResourceView) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.GuaranteeID != b.GuaranteeID {
			return a.GuaranteeID < b.GuaranteeID
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.Subject < b.Subject
	})
}

// MarshalView returns the view.json form of v: indented JSON (two spaces,
// no HTML escaping) and a newline.
func MarshalView(v View) ([]byte, error) {
	if v.Resources == nil {
		v.Resources = []ResourceView{}
	}
	if v.Incidents == nil {
		v.Incidents = []Incident{}
	}
	for i := range v.Resources {
		if v.Resources[i].OpenAttempts == nil {
			v.Resources[i].OpenAttempts = []OpenAttempt{}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ParseView parses view.json strictly: unknown fields and trailing data are
// refused, version 1, and b must be exactly MarshalView of the result.
func ParseView(b []byte) (View, error) {
	if len(b) > maxEntriesSize {
		return View{}, errors.New("verifier: view: file too large")
	}
	var v View
	if err := kernel.StrictJSON(b, &v); err != nil {
		return View{}, fmt.Errorf("verifier: view: %w", err)
	}
	if v.V != ViewVersion {
		return View{}, fmt.Errorf("verifier: view: want \"v\": %d", ViewVersion)
	}
	seen := map[string]bool{}
	for _, r := range v.Resources {
		if seen[r.Subject] {
			return View{}, fmt.Errorf("verifier: view: subject %q appears twice", r.Subject)
		}
		seen[r.Subject] = true
	}
	again, err := MarshalView(v)
	if err != nil {
		return View{}, err
	}
	if !bytes.Equal(again, b) {
		return View{}, errors.New("verifier: view: not in the form MarshalView writes")
	}
	return v, nil
}

// Replay reads events.jsonl (see ReadEvents), verifies every event's
// signature when keyring is not nil, and folds the events (Fold) into the
// View of their tenant. All lines must belong to one tenant; an empty input
// gives an empty view with no tenant.
func Replay(r io.Reader, keyring codec.Keyring) (View, error) {
	var f *Fold
	err := ReadEvents(r, func(l EventLine) error {
		if keyring != nil {
			if err := keyring.Verify(l.Envelope); err != nil {
				return fmt.Errorf("verifier: replay: seq %d: %w", l.Seq, err)
			}
		}
		if f == nil {
			f = NewFold(l.Envelope.Tenant)
		}
		return f.Apply(l.Seq, l.Subject, l.Envelope)
	})
	if err != nil {
		return View{}, err
	}
	if f == nil {
		return View{V: ViewVersion, Resources: []ResourceView{}, Incidents: []Incident{}}, nil
	}
	return f.View(), nil
}

// ReplayEntries folds the events held by an audit export's records (Fold)
// into the View of its tenant. Unlike events.jsonl, whose seq and subject
// are not signed, a record signs the event's sequence and subject too: verify
// the export first (VerifyEntries), then replay it here.
func ReplayEntries(e Entries) (View, error) {
	f := NewFold(e.Tenant)
	for i, raw := range e.Records {
		r, env, err := audit.Parse(raw)
		if err != nil {
			return View{}, fmt.Errorf("verifier: record %d: %w", i, err)
		}
		if err := f.Apply(r.EventSeq, r.Subject, env); err != nil {
			return View{}, fmt.Errorf("verifier: record %d: %w", i, err)
		}
	}
	return f.View(), nil
}

// Diff is one difference between two views.
type Diff struct {
	Subject string // the resource ledger's subject; "" for view-level fields
	Field   string
	Got     string
	Want    string
}

// String formats the difference for humans.
func (d Diff) String() string {
	if d.Subject == "" {
		return fmt.Sprintf("%s: got %s, want %s", d.Field, d.Got, d.Want)
	}
	return fmt.Sprintf("%s %s: got %s, want %s", d.Subject, d.Field, d.Got, d.Want)
}

// Compare returns every difference between got (for example recomputed by
// Replay) and want (for example the live view.json), in a stable order; none
// means the views are equal.
func Compare(got, want View) []Diff {
	var out []Diff
	add := func(subject, field string, g, w any) {
		gs, ws := fmt.Sprint(g), fmt.Sprint(w)
		if gs != ws {
			out = append(out, Diff{Subject: subject, Field: field, Got: gs, Want: ws})
		}
	}
	add("", "tenant", strconv.Quote(got.Tenant), strconv.Quote(want.Tenant))
	add("", "seq", got.Seq, want.Seq)
	gr, wr := bySubject(got.Resources), bySubject(want.Resources)
	subjects := map[string]bool{}
	for s := range gr {
		subjects[s] = true
	}
	for s := range wr {
		subjects[s] = true
	}
	keys := make([]string, 0, len(subjects))
	for s := range subjects {
		keys = append(keys, s)
	}
	sort.Strings(keys)
	for _, s := range keys {
		g, gok := gr[s]
		w, wok := wr[s]
		if !gok || !wok {
			add(s, "present", gok, wok)
			continue
		}
		add(s, "guarantee_id", g.GuaranteeID, w.GuaranteeID)
		add(s, "resource", strconv.Quote(g.Resource), strconv.Quote(w.Resource))
		add(s, "limit", g.Limit, w.Limit)
		add(s, "committed", g.Committed, w.Committed)
		add(s, "held", g.Held, w.Held)
		add(s, "available", g.Available, w.Available)
		add(s, "receipts", g.Receipts, w.Receipts)
		add(s, "archived_receipts", jsonString(g.Archived), jsonString(w.Archived))
		add(s, "window", g.Window, w.Window)
		add(s, "over_limit", g.OverLimit, w.OverLimit)
		add(s, "open_attempts", jsonString(g.OpenAttempts), jsonString(w.OpenAttempts))
	}
	add("", "incidents", jsonString(got.Incidents), jsonString(want.Incidents))
	return out
}

func bySubject(rs []ResourceView) map[string]ResourceView {
	m := make(map[string]ResourceView, len(rs))
	for _, r := range rs {
		m[r.Subject] = r
	}
	return m
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if string(b) == "null" {
		return "[]"
	}
	return string(b)
}
