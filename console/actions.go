package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/contextos/ledger/wire"
)

// field is one input of an action.
type field struct {
	Name     string
	Label    string
	Hidden   bool     // carried from the page that offered the action
	Required bool     // the console asks for it before sending
	Options  []string // a choice, when set
	Value    string
}

// action is one operator action: the ops verb it sends and the form it needs.
// Every action is confirmed on its own page before it is sent.
type action struct {
	Name     string
	Label    string
	Verb     string
	Describe string
	Return   string // the page shown after it
	Danger   bool
	Fields   []field
	// request builds the verb's body from the confirmed form.
	request func(s *Server, sess *session, v url.Values) (any, error)
}

var actions = map[string]*action{}

func init() {
	for _, a := range []*action{
		{Name: "reconcile", Label: "Reconcile", Verb: "reconcile", Return: "/exposure",
			Describe: "Query the provider about this attempt by its idempotency key and record the answer. A definitive answer settles the hold.",
			Fields:   []field{{Name: "attempt_id", Label: "Attempt", Hidden: true, Required: true}},
			request: func(_ *Server, _ *session, v url.Values) (any, error) {
				return wire.OpRequest{AttemptID: v.Get("attempt_id")}, nil
			}},
		{Name: "close-attempt", Label: "Close the unstarted attempt", Verb: "close-attempt", Return: "/exposure", Danger: true,
			Describe: "Release the hold of an attempt whose dispatch never started. The runtime refuses it for a started attempt.",
			Fields:   []field{{Name: "attempt_id", Label: "Attempt", Hidden: true, Required: true}, {Name: "reason", Label: "Reason"}},
			request: func(_ *Server, _ *session, v url.Values) (any, error) {
				return wire.OpRequest{AttemptID: v.Get("attempt_id"), Reason: v.Get("reason")}, nil
			}},
		{Name: "assert-absence", Label: "Assert absence", Verb: "assert-absence", Return: "/exposure", Danger: true,
			Describe: "Record, signed in your name, that the effect did not happen, with the artifact that shows it (a provider export, a ticket, a statement line). It releases the hold; a later report of the effect is refused and recorded as an incident.",
			Fields: []field{{Name: "attempt_id", Label: "Attempt", Hidden: true, Required: true},
				{Name: "artifact_ref", Label: "Artifact reference", Required: true}},
			request: func(_ *Server, _ *session, v url.Values) (any, error) {
				return wire.OpRequest{AttemptID: v.Get("attempt_id"), ArtifactRef: v.Get("artifact_ref")}, nil
			}},
		{Name: "kill-switch-engage", Label: "Engage the kill switch", Verb: "kill-switch", Return: "/kill-switch", Danger: true,
			Describe: "Refuse every new proposal of the tenant (kill_switch_engaged) on every replica. Settlement and reconciliation of existing attempts go on.",
			Fields:   []field{{Name: "reason", Label: "Reason", Required: true}},
			request: func(_ *Server, _ *session, v url.Values) (any, error) {
				on := true
				return wire.OpRequest{Engaged: &on, Reason: v.Get("reason")}, nil
			}},
		{Name: "kill-switch-release", Label: "Release the kill switch", Verb: "kill-switch", Return: "/kill-switch",
			Describe: "Let the tenant's proposals through again.",
			Fields:   []field{{Name: "reason", Label: "Reason", Required: true}},
			request: func(_ *Server, _ *session, v url.Values) (any, error) {
				off := false
				return wire.OpRequest{Engaged: &off, Reason: v.Get("reason")}, nil
			}},
		{Name: "approve", Label: "Approve", Verb: "approve", Return: "/approvals",
			Describe: "Approve exactly this action: the approval is bound to its digest, redeemable once, until it expires. The agent's resend of the same action, naming the approval, then proceeds.",
			Fields: []field{{Name: "action_digest", Label: "Action digest", Hidden: true, Required: true},
				{Name: "capability_id", Label: "Capability", Hidden: true, Required: true},
				{Name: "expires_in", Label: "Expires in", Required: true, Options: approvalExpiries},
				{Name: "reason", Label: "Reason"}},
			request: approvalRequest},
		{Name: "deny", Label: "Deny", Verb: "deny", Return: "/approvals", Danger: true,
			Describe: "Deny exactly this action, with a reason, recorded in your name.",
			Fields: []field{{Name: "action_digest", Label: "Action digest", Hidden: true, Required: true},
				{Name: "capability_id", Label: "Capability", Hidden: true, Required: true},
				{Name: "reason", Label: "Reason", Required: true}},
			request: denyRequest},
		{Name: "grant", Label: "Grant", Verb: "grant", Return: "/authority",
			Describe: "Grant the principal the capability, recorded in your name.",
			Fields: []field{{Name: "principal", Label: "Principal", Required: true}, {Name: "capability_id", Label: "Capability", Required: true},
				{Name: "reason", Label: "Reason"}},
			request: grantRequest},
		{Name: "revoke", Label: "Revoke", Verb: "revoke", Return: "/authority", Danger: true,
			Describe: "Revoke the capability from the principal, recorded in your name: its next proposal of it is refused authority_denied.",
			Fields: []field{{Name: "principal", Label: "Principal", Required: true}, {Name: "capability_id", Label: "Capability", Required: true},
				{Name: "reason", Label: "Reason"}},
			request: grantRequest},
	} {
		actions[a.Name] = a
	}
}

// approvalRequest is the body of approve: the exact digest and the
// capability's risk from the manifest.
func approvalRequest(s *Server, _ *session, v url.Values) (any, error) {
	risk := ""
	if s.o.Manifest != nil {
		if cp, ok := s.o.Manifest.Capability(v.Get("capability_id")); ok {
			risk = cp.Risk
		}
	}
	if risk == "" {
		return nil, fmt.Errorf("capability %q is not in the manifest", v.Get("capability_id"))
	}
	expires := v.Get("expires_in")
	if expires == "" {
		expires = approvalExpiries[0]
	}
	return wire.ApproveRequest{ActionDigest: v.Get("action_digest"), Risk: risk, ExpiresIn: expires, Reason: v.Get("reason")}, nil
}

// denyBody is the body of the deny verb answering a pending request: the
// exact digest, the capability's risk and the required reason (the
// gateway's DenyRequest without an approval id).
type denyBody struct {
	ActionDigest string `json:"action_digest"`
	Risk         string `json:"risk"`
	Reason       string `json:"reason"`
}

func denyRequest(s *Server, sess *session, v url.Values) (any, error) {
	a, err := approvalRequest(s, sess, v)
	if err != nil {
		return nil, err
	}
	ap := a.(wire.ApproveRequest)
	return denyBody{ActionDigest: ap.ActionDigest, Risk: ap.Risk, Reason: ap.Reason}, nil
}

func grantRequest(_ *Server, _ *session, v url.Values) (any, error) {
	return wire.GrantRequest{Principal: v.Get("principal"), CapabilityID: v.Get("capability_id"), Reason: v.Get("reason")}, nil
}

// maxFieldBytes bounds every field of an action.
const maxFieldBytes = 1024

// form reads the action's fields from v, checking the required ones and
// the bounds, and any choice against its options.
func (a *action) form(v url.Values) ([]field, string) {
	out := make([]field, len(a.Fields))
	missing := ""
	for i, f := range a.Fields {
		f.Value = strings.TrimSpace(v.Get(f.Name))
		if len(f.Value) > maxFieldBytes {
			f.Value = f.Value[:maxFieldBytes]
			missing = f.Label + " is longer than 1024 bytes"
		}
		if f.Required && f.Value == "" && missing == "" {
			missing = f.Label + " is required"
		}
		if len(f.Options) > 0 && f.Value != "" && !contains(f.Options, f.Value) {
			missing = f.Label + " must be one of " + strings.Join(f.Options, ", ")
		}
		out[i] = f
	}
	return out, missing
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// confirmView is the confirmation page of an action.
type confirmView struct {
	Action  *action
	Fields  []field
	Attempt *wire.AttemptRow
	Request *Approval
	Problem string
}

func (s *Server) confirmPage(w http.ResponseWriter, r *http.Request, sess *session) {
	a := actions[r.PathValue("action")]
	if a == nil {
		http.NotFound(w, r)
		return
	}
	fields, _ := a.form(r.URL.Query())
	v := confirmView{Action: a, Fields: fields}
	if id := r.URL.Query().Get("attempt_id"); id != "" {
		if row, err := s.openAttempt(r.Context(), sess, id); err == nil {
			v.Attempt = &row
		} else {
			v.Problem = err.Error()
		}
	}
	if d := r.URL.Query().Get("action_digest"); d != "" {
		if req, err := s.findApproval(r.Context(), sess, d); err == nil {
			v.Request = req
		}
	}
	s.render(w, http.StatusOK, "confirm", s.page(sess, "", a.Label, v))
}

// result is what an action's reply said, shown once on the next page.
type result struct {
	OK     bool
	Action string
	Code   string
	Reason string
	Lines  []string
}

// act sends a confirmed action through the operator's connection.
func (s *Server) act(w http.ResponseWriter, r *http.Request, sess *session) {
	a := actions[r.PathValue("action")]
	if a == nil {
		http.NotFound(w, r)
		return
	}
	fields, problem := a.form(r.PostForm)
	if problem != "" {
		v := confirmView{Action: a, Fields: fields, Problem: problem}
		p := s.page(sess, "", a.Label, v)
		w.Header().Set("X-Console-Refused", "form")
		s.render(w, http.StatusBadRequest, "confirm", p)
		return
	}
	vals := url.Values{}
	for _, f := range fields {
		vals.Set(f.Name, f.Value)
	}
	res := &result{Action: a.Label}
	req, err := a.request(s, sess, vals)
	if err == nil {
		var reply wire.OpReply
		err = sess.call(context.WithoutCancel(r.Context()), a.Verb, req, &reply)
		if err == nil {
			*res = describeReply(a.Label, reply)
		}
	}
	if err != nil {
		res.Code, res.Reason = "unreachable", err.Error()
	}
	s.o.Logger.Info("console action", "tenant", sess.tenant, "operator", sess.operator, "action", a.Name, "ok", res.OK, "code", res.Code)
	sess.setFlash(res)
	back(w, r, a.Return)
}

// describeReply turns an ops reply into lines for the operator. A
// reconciliation is OK only if every attempt it touched was.
func describeReply(label string, reply wire.OpReply) result {
	res := result{OK: reply.OK, Action: label, Code: string(reply.Code), Reason: reply.Reason}
	for _, row := range reply.Settled {
		line := "attempt " + row.AttemptID
		if row.Status != "" {
			line += ": " + string(row.Status)
		}
		if row.Outcome != "" {
			line += " (observed " + string(row.Outcome) + ")"
		}
		if row.Code != "" {
			res.OK = false
			line += " refused " + string(row.Code)
			if res.Code == "" {
				res.Code = string(row.Code)
			}
		}
		if row.Reason != "" {
			line += ": " + row.Reason
		}
		res.Lines = append(res.Lines, line)
	}
	if reply.KillSwitch != nil {
		state := "released"
		if *reply.KillSwitch {
			state = "engaged"
		}
		res.Lines = append(res.Lines, "kill switch "+state)
	}
	keys := make([]string, 0, len(reply.Data))
	for k := range reply.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Lines = append(res.Lines, fmt.Sprintf("%s: %v", k, reply.Data[k]))
	}
	if reply.OK && res.Code == "" && len(res.Lines) == 0 {
		res.Lines = append(res.Lines, "done")
	}
	return res
}
