package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// pageRows is how many rows a page asks the runtime for, a page of each
// list at a time: a "next" link reads the page after (the runtime's
// next_cursor), so no tenant's volume grows a page without bound.
const pageRows = 100

// maxFindPages bounds the pages read to find one attempt or one approval
// request by its id (a confirmation page).
const maxFindPages = 100

// exposureRow is one resource's balances with its bar.
type exposureRow struct {
	wire.ExposureRow
	Unit         string
	CommittedPct string // the bar's segments, in percent of the limit
	HeldPct      string
	HeldX        string
}

// holdRow is an open attempt with the actions the daemon's next safe step
// names for it.
type holdRow struct {
	wire.AttemptRow
	Actions []string
	Age     string // since the reservation, as this console's clock reads it
}

// exposureView is the live part of the exposure page.
type exposureView struct {
	Rows  []exposureRow
	Holds []holdRow
	// Cursors of the pages shown ("" the first) and of the next ones (""
	// after the last).
	Cursor, HoldsCursor string
	NextRows, NextHolds string
	Live                string // the live stream of these pages
	KillSwitch          bool
	Error               string
	At                  string
}

// exposureQuery is the query of the exposure page showing the pages at
// cursor (resources) and holds.
func exposureQuery(cursor, holds string) string {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if holds != "" {
		q.Set("holds", holds)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// actionsOf maps the kernel's next safe step of an open attempt to the
// console actions that carry it out. The kernel decides what is allowed:
// this is the menu of its words, and the daemon refuses anything else.
var actionsOf = map[string][]string{
	kernel.NextStepReserved: {"close-attempt"},
	kernel.NextStepStarted:  {"reconcile"},
	kernel.NextStepHeld:     {"reconcile", "assert-absence"},
}

func (s *Server) unit(guaranteeID string) string {
	if s.o.Manifest == nil {
		return ""
	}
	for _, d := range s.o.Manifest.Guarantees {
		if d.ID == guaranteeID {
			return d.Unit
		}
	}
	return ""
}

func percent(part, whole int64) float64 {
	if whole <= 0 || part <= 0 {
		return 0
	}
	p := float64(part) * 100 / float64(whole)
	if p > 100 {
		p = 100
	}
	return p
}

// exposure reads a page of the tenant's balances (from cursor), a page of
// its open holds (from holds) and its kill switch.
func (s *Server) exposure(ctx context.Context, sess *session, cursor, holds string) exposureView {
	v := exposureView{At: s.o.Now().UTC().Format(time.RFC3339), Cursor: cursor, HoldsCursor: holds,
		Live: "/exposure/live" + exposureQuery(cursor, holds)}
	var exp, att, ks wire.OpReply
	for _, c := range []struct {
		verb string
		req  wire.OpRequest
		out  *wire.OpReply
	}{{"exposure", wire.OpRequest{Limit: pageRows, Cursor: cursor}, &exp}, {"attempts", wire.OpRequest{Limit: pageRows, Cursor: holds}, &att},
		{"kill-switch", wire.OpRequest{}, &ks}} {
		if err := sess.call(ctx, c.verb, c.req, c.out); err != nil {
			v.Error = err.Error()
			return v
		}
		if !c.out.OK {
			v.Error = fmt.Sprintf("%s refused: %s: %s", c.verb, c.out.Code, c.out.Reason)
			return v
		}
	}
	v.KillSwitch = ks.KillSwitch != nil && *ks.KillSwitch
	v.NextRows, v.NextHolds = exp.NextCursor, att.NextCursor
	for _, r := range exp.Exposure {
		c, h := percent(r.Committed, r.Limit), percent(r.Held, r.Limit)
		v.Rows = append(v.Rows, exposureRow{ExposureRow: r, Unit: s.unit(r.GuaranteeID),
			CommittedPct: strconv.FormatFloat(c, 'f', 2, 64), HeldPct: strconv.FormatFloat(h, 'f', 2, 64), HeldX: strconv.FormatFloat(c, 'f', 2, 64)})
	}
	for _, a := range att.Attempts {
		h := holdRow{AttemptRow: a, Actions: actionsOf[a.NextStep], Age: "—"}
		if !a.ReservedAt.IsZero() {
			h.Age = holdAge(time.Since(a.ReservedAt))
		}
		v.Holds = append(v.Holds, h)
	}
	return v
}

func (s *Server) exposurePage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	s.render(w, http.StatusOK, "exposure", s.page(sess, "exposure", "Exposure and open holds", s.exposure(r.Context(), sess, q.Get("cursor"), q.Get("holds"))))
}

// keepAlive is how often a live stream with nothing new sends a comment.
const keepAlive = 15 * time.Second

// exposureLive streams the live part of the exposure page as server-sent
// events: the fragment re-rendered from the runtime's replies, sent when it
// changed.
func (s *Server) exposureLive(w http.ResponseWriter, r *http.Request, sess *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	sess.mu.Lock()
	if sess.streams >= maxStreamsPerSession {
		sess.mu.Unlock()
		http.Error(w, "too many live views in this session", http.StatusTooManyRequests)
		return
	}
	sess.streams++
	sess.mu.Unlock()
	defer func() {
		sess.mu.Lock()
		sess.streams--
		sess.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	var last []byte
	sent := time.Now()
	for {
		if !s.sessions.Alive(sess.id) {
			fmt.Fprint(w, "event: ended\ndata: session ended\n\n")
			fl.Flush()
			return
		}
		v := s.exposure(r.Context(), sess, r.URL.Query().Get("cursor"), r.URL.Query().Get("holds"))
		at := v.At
		v.At = "" // the time alone is no change
		var b bytes.Buffer
		if err := s.pages["exposure"].ExecuteTemplate(&b, "live", v); err != nil {
			return
		}
		switch {
		case !bytes.Equal(b.Bytes(), last):
			last = b.Bytes()
			v.At = at
			var out bytes.Buffer
			if err := s.pages["exposure"].ExecuteTemplate(&out, "live", v); err != nil {
				return
			}
			writeEvent(w, "live", out.Bytes())
			sent = time.Now()
		case time.Since(sent) >= keepAlive: // proxies close streams that stay silent
			fmt.Fprint(w, ": keep-alive\n\n")
			sent = time.Now()
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

// writeEvent writes one server-sent event; every line of data is its own
// data field. A carriage return ends a line for the browser's parser too,
// so one inside what an agent controls (a resource id, say) is turned into
// a newline first: it can only split a data line, never start a field.
func writeEvent(w io.Writer, name string, data []byte) {
	data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	fmt.Fprintf(w, "event: %s\n", name)
	for _, line := range bytes.Split(data, []byte("\n")) {
		fmt.Fprintf(w, "data: %s\n", line)
	}
	fmt.Fprint(w, "\n")
}

// killSwitchView is the kill switch page.
type killSwitchView struct {
	Engaged bool
	// Audit is the last change as the verified audit chain records it, as
	// of the session's last verification.
	Audit   *KillChange
	AuditAt string
}

func (s *Server) killSwitchPage(w http.ResponseWriter, r *http.Request, sess *session) {
	p := s.page(sess, "kill-switch", "Kill switch", nil)
	var reply wire.OpReply
	err := sess.call(r.Context(), "kill-switch", struct{}{}, &reply)
	v := killSwitchView{}
	switch {
	case err != nil:
		p.Error = err.Error()
	case !reply.OK:
		p.Error = fmt.Sprintf("kill-switch refused: %s: %s", reply.Code, reply.Reason)
	default:
		v.Engaged = reply.KillSwitch != nil && *reply.KillSwitch
	}
	sess.mu.Lock()
	if a := sess.audit; a != nil && a.OK {
		v.Audit, v.AuditAt = a.Kill, a.At
	}
	sess.mu.Unlock()
	p.Data = v
	s.render(w, http.StatusOK, "kill-switch", p)
}

// Approval is one proposal refused approval_required, waiting for an
// operator: a row of the approvals verb's reply.
type Approval struct{ wire.PendingApproval }

// ArgumentsText is the arguments indented for reading, at most 4 KiB. The
// runtime shows a string over 256 bytes shortened, followed by its SHA-256,
// and leaves out arguments too large even so.
func (a Approval) ArgumentsText() string {
	if a.ArgumentsBytes > 0 {
		return fmt.Sprintf("(%d bytes, too large to show; SHA-256 %s)", a.ArgumentsBytes, a.ArgumentsDigest)
	}
	var b bytes.Buffer
	if json.Indent(&b, a.Arguments, "", "  ") != nil {
		b.Reset()
		b.Write(a.Arguments)
	}
	if b.Len() > 4096 {
		return string(b.Bytes()[:4096]) + "\n… (cut)"
	}
	return b.String()
}

type approvalsView struct {
	Rows      []Approval
	Cursor    string // of this page; "" the first
	Next      string // of the next page; "" after the last
	ExpiresIn []string
}

// approvalExpiries are the expiries an operator picks from (the kernel
// bounds them at kernel.MaxApprovalTTL).
var approvalExpiries = []string{"15m", "1h", "4h", "24h"}

// approvals reads the page of pending approvals at cursor and the cursor
// of the next.
func (s *Server) approvals(ctx context.Context, sess *session, cursor string) ([]Approval, string, error) {
	var reply wire.OpReply
	if err := sess.call(ctx, wire.VerbApprovals, wire.ListRequest{Limit: pageRows, Cursor: cursor}, &reply); err != nil {
		return nil, "", err
	}
	if !reply.OK {
		return nil, "", fmt.Errorf("approvals refused: %s: %s", reply.Code, reply.Reason)
	}
	return Approvals(reply.Approvals), reply.NextCursor, nil
}

// Approvals wraps the rows of an approvals reply.
func Approvals(rows []wire.PendingApproval) []Approval {
	out := make([]Approval, len(rows))
	for i, r := range rows {
		out[i] = Approval{r}
	}
	return out
}

// findApproval pages through the pending approvals for the request of an
// action digest.
func (s *Server) findApproval(ctx context.Context, sess *session, digest string) (*Approval, error) {
	cursor := ""
	for range maxFindPages {
		rows, next, err := s.approvals(ctx, sess, cursor)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if rows[i].ActionDigest == digest {
				return &rows[i], nil
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return nil, nil
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	p := s.page(sess, "approvals", "Approvals inbox", nil)
	v := approvalsView{ExpiresIn: approvalExpiries, Cursor: r.URL.Query().Get("cursor")}
	var err error
	if v.Rows, v.Next, err = s.approvals(r.Context(), sess, v.Cursor); err != nil {
		p.Error = err.Error()
	}
	p.Data = v
	s.render(w, http.StatusOK, "approvals", p)
}

type incidentsView struct {
	Rows   []wire.Incident
	Cursor string // of this page; "" the first
	Next   string // of the next page; "" after the last
}

func (s *Server) incidentsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	p := s.page(sess, "incidents", "Incidents", nil)
	var reply wire.OpReply
	v := incidentsView{Cursor: r.URL.Query().Get("cursor")}
	if err := sess.call(r.Context(), wire.VerbIncidents, wire.ListRequest{Limit: pageRows, Cursor: v.Cursor}, &reply); err != nil {
		p.Error = err.Error()
	} else if !reply.OK {
		p.Error = fmt.Sprintf("incidents refused: %s: %s", reply.Code, reply.Reason)
	}
	v.Rows, v.Next = reply.Incidents, reply.NextCursor
	p.Data = v
	s.render(w, http.StatusOK, "incidents", p)
}

// decisionsView is a page of decision records, filtered as the query
// asks; each evidence ref links to the decisions that cited it, each
// resolution to the decisions derived from it.
type decisionsView struct {
	Rows   []wire.DecisionRow
	Filter wire.DecisionsRequest
	Query  string // the filter as a query, for the pager's links
	Cursor string // of this page; "" the first
	Next   string // of the next page; "" after the last
}

func (s *Server) decisionsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	p := s.page(sess, "decisions", "Decisions", nil)
	q := r.URL.Query()
	f := wire.DecisionsRequest{RunID: q.Get("run_id"), OperationID: q.Get("operation_id"), Principal: q.Get("principal"),
		EvidenceRef: q.Get("evidence_ref"), ResolutionRef: q.Get("resolution_ref")}
	keep := url.Values{}
	for k, v := range map[string]string{"run_id": f.RunID, "operation_id": f.OperationID, "principal": f.Principal,
		"evidence_ref": f.EvidenceRef, "resolution_ref": f.ResolutionRef} {
		if v != "" {
			keep.Set(k, v)
		}
	}
	v := decisionsView{Filter: f, Query: keep.Encode(), Cursor: q.Get("cursor")}
	req := f
	req.Limit, req.Cursor = pageRows, v.Cursor
	var reply wire.OpReply
	if err := sess.call(r.Context(), wire.VerbDecisions, req, &reply); err != nil {
		p.Error = err.Error()
	} else if !reply.OK {
		p.Error = fmt.Sprintf("decisions refused: %s: %s", reply.Code, reply.Reason)
	}
	v.Rows, v.Next = reply.Decisions, reply.NextCursor
	p.Data = v
	s.render(w, http.StatusOK, "decisions", p)
}

// outcomesPage shows the outcome report (the report verb, computed from
// the runtime's read model): per guarantee and window, applied, denials by
// code, pending, unknown and stranded exposure by age.
func (s *Server) outcomesPage(w http.ResponseWriter, r *http.Request, sess *session) {
	p := s.page(sess, "outcomes", "Outcomes", nil)
	var reply wire.OpReply
	if err := sess.call(r.Context(), wire.VerbReport, wire.ReportRequest{}, &reply); err != nil {
		p.Error = err.Error()
	} else if !reply.OK {
		p.Error = fmt.Sprintf("report refused: %s: %s", reply.Code, reply.Reason)
	}
	p.Data = outcomesView{Rows: reply.Outcomes, Ages: wire.AgeBuckets}
	s.render(w, http.StatusOK, "outcomes", p)
}

// outcomesView is the report's rows and the age buckets in order.
type outcomesView struct {
	Rows []wire.OutcomeRow
	Ages []string
}

// authorityView lists the tenant's agents and the capabilities of the
// manifest: the grants the configuration gives and, once the session has
// verified the audit chain, the operators' grants and revocations it
// records and what the kernel's CheckAuthority makes of both.
type authorityView struct {
	Agents       []agentRow
	Capabilities []string
	Changes      []kernel.AuthorityChanged // from the verified chain
	AuditAt      string                    // when the chain was verified; "" if not yet
}

type agentRow struct {
	ID         string
	Configured []string
	Effective  []holding // per capability of the manifest, once the chain is verified
}

type holding struct {
	CapabilityID string
	Holds        bool
	Source       string // the kernel's authority source, or its refusal
}

func (s *Server) authorityPage(w http.ResponseWriter, r *http.Request, sess *session) {
	p := s.page(sess, "authority", "Authority", nil)
	v := authorityView{}
	sess.mu.Lock()
	var auth *kernel.Authority
	if a := sess.audit; a != nil && a.OK && a.Authority != nil {
		auth, v.AuditAt = a.Authority, a.At
	}
	sess.mu.Unlock()
	if auth != nil {
		keys := make([]string, 0, len(auth.Overrides))
		for k := range auth.Overrides {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v.Changes = append(v.Changes, auth.Overrides[k])
		}
	}
	if m := s.o.Manifest; m != nil {
		for _, c := range m.Capabilities {
			v.Capabilities = append(v.Capabilities, c.ID)
		}
		if tc, ok := m.Tenant(sess.tenant); ok {
			for _, a := range tc.Agents {
				caps := append([]string(nil), a.Capabilities...)
				sort.Strings(caps)
				row := agentRow{ID: a.ID, Configured: caps}
				if auth != nil {
					for _, c := range v.Capabilities {
						src, refused := kernel.CheckAuthority(auth, a.ID, c, contains(caps, c))
						h := holding{CapabilityID: c, Holds: refused == nil, Source: src}
						if refused != nil {
							h.Source = refused.Reason
						}
						row.Effective = append(row.Effective, h)
					}
				}
				v.Agents = append(v.Agents, row)
			}
		}
	}
	p.Data = v
	s.render(w, http.StatusOK, "authority", p)
}

// errNoSuchAttempt is an attempt id the confirmation page cannot find open.
var errNoSuchAttempt = errors.New("no open attempt has this id")

// openAttempt finds one open attempt of the session's tenant, paging
// through the open attempts.
func (s *Server) openAttempt(ctx context.Context, sess *session, id string) (wire.AttemptRow, error) {
	cursor := ""
	for range maxFindPages {
		var reply wire.OpReply
		if err := sess.call(ctx, "attempts", wire.OpRequest{Limit: wire.MaxPageLimit, Cursor: cursor}, &reply); err != nil {
			return wire.AttemptRow{}, err
		}
		if !reply.OK {
			return wire.AttemptRow{}, fmt.Errorf("attempts refused: %s: %s", reply.Code, reply.Reason)
		}
		for _, a := range reply.Attempts {
			if a.AttemptID == id {
				return a, nil
			}
		}
		if reply.NextCursor == "" {
			break
		}
		cursor = reply.NextCursor
	}
	return wire.AttemptRow{}, errNoSuchAttempt
}

// group writes an integer with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// holdAge is a hold's age as an operator reads it: seconds, then minutes,
// hours and days.
func holdAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
