package verifier

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
)

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
	incidents []exposure.Incident
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
	if in, ok := exposure.IncidentOf(seq, subject, env); ok {
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
	if err := exposure.CheckExposureSubject(f.tenant, subject, ev); err != nil {
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

// View returns the fold's current view.
func (f *Fold) View() exposure.View {
	v := exposure.View{V: exposure.ViewVersion, Tenant: f.tenant, Seq: f.seq, Resources: []exposure.ResourceView{}, Incidents: append([]exposure.Incident{}, f.incidents...)}
	for subject, l := range f.ledgers {
		v.Resources = append(v.Resources, exposure.ResourceOf(subject, l))
	}
	exposure.SortResources(v.Resources)
	return v
}

// Replay reads events.jsonl (see ReadEvents), verifies every event's
// signature when keyring is not nil, and folds the events (Fold) into the
// View of their tenant. All lines must belong to one tenant; an empty input
// gives an empty view with no tenant.
func Replay(r io.Reader, keyring codec.Keyring) (exposure.View, error) {
	var f *Fold
	err := audit.ReadEvents(r, func(l audit.EventLine) error {
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
		return exposure.View{}, err
	}
	if f == nil {
		return exposure.View{V: exposure.ViewVersion, Resources: []exposure.ResourceView{}, Incidents: []exposure.Incident{}}, nil
	}
	return f.View(), nil
}

// ReplayEntries folds the events held by an audit export's records (Fold)
// into the View of its tenant. Unlike events.jsonl, whose seq and subject
// are not signed, a record signs the event's sequence and subject too: verify
// the export first (VerifyEntries), then replay it here.
func ReplayEntries(e audit.Entries) (exposure.View, error) {
	f := NewFold(e.Tenant)
	for i, raw := range e.Records {
		r, env, err := audit.Parse(raw)
		if err != nil {
			return exposure.View{}, fmt.Errorf("verifier: record %d: %w", i, err)
		}
		if err := f.Apply(r.EventSeq, r.Subject, env); err != nil {
			return exposure.View{}, fmt.Errorf("verifier: record %d: %w", i, err)
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
func Compare(got, want exposure.View) []Diff {
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

func bySubject(rs []exposure.ResourceView) map[string]exposure.ResourceView {
	m := make(map[string]exposure.ResourceView, len(rs))
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
