package exposure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
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

// maxViewSize bounds what ParseView reads (1 GiB, as an export).
const maxViewSize = 1 << 30

// ParseView parses view.json strictly: unknown fields and trailing data are
// refused, version 1, and b must be exactly MarshalView of the result.
func ParseView(b []byte) (View, error) {
	if len(b) > maxViewSize {
		return View{}, errors.New("exposure: view: file too large")
	}
	var v View
	if err := kernel.StrictJSON(b, &v); err != nil {
		return View{}, fmt.Errorf("exposure: view: %w", err)
	}
	if v.V != ViewVersion {
		return View{}, fmt.Errorf("exposure: view: want \"v\": %d", ViewVersion)
	}
	seen := map[string]bool{}
	for _, r := range v.Resources {
		if seen[r.Subject] {
			return View{}, fmt.Errorf("exposure: view: subject %q appears twice", r.Subject)
		}
		seen[r.Subject] = true
	}
	again, err := MarshalView(v)
	if err != nil {
		return View{}, err
	}
	if !bytes.Equal(again, b) {
		return View{}, errors.New("exposure: view: not in the form MarshalView writes")
	}
	return v, nil
}
