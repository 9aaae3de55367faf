package tower

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// The review queue's and the guardrails' actions. Each is sent through the
// session's login of the tenant, as the operator logged in, with the
// runtime's own operator verb (approve, deny, confirm, guardrail, waiver):
// the runtime's kernel decides, checks the operator's scopes and records
// the decision (or the refusal) in the operator's name. The page shows
// each runtime's answer, a refusal with its stable code.

// maxWaiverFor bounds the waiver form's duration; the kernel bounds it
// again (kernel.MaxWaiverDuration).
const maxWaiverFor = kernel.MaxWaiverDuration

// one finds the source the form names (runtime, tenant) among the
// session's tenants.
func (s *Server) one(sess *session, r *http.Request) (source, bool) {
	rt, tenant := r.PostFormValue("runtime"), r.PostFormValue("tenant")
	if sess.Login(tenant) == nil {
		return source{}, false
	}
	for _, src := range s.t.sources(tenant) {
		if src.rt.Name == rt {
			return src, true
		}
	}
	return source{}, false
}

// sessionTenants lists the tenants the session is logged into, or only
// the form's tenant when it names one of them.
func sessionTenants(sess *session, only string) []string {
	var out []string
	for _, l := range sess.Logins() {
		if only == "" || l.Tenant == only {
			out = append(out, l.Tenant)
		}
	}
	return out
}

func (s *Server) refuseForm(w http.ResponseWriter, r *http.Request, sess *session, msg string) {
	p := s.page(r.Context(), sess, false)
	p.Error = msg
	s.render(w, http.StatusBadRequest, "fleet", p)
}

// answered keeps the answers for the page, logs them and reads the session's
// logs again.
func (s *Server) answered(w http.ResponseWriter, r *http.Request, sess *session, what string, acks []Ack) {
	for _, a := range acks {
		s.log.Info("towerd "+what, "runtime", a.Runtime, "tenant", a.Tenant, "operator", a.Operator, "acknowledged", a.Acknowledged, "code", a.Code)
	}
	sess.State.mu.Lock()
	sess.State.outcome, sess.State.outcomeWhat = acks, what
	sess.State.mu.Unlock()
	s.page(context.WithoutCancel(r.Context()), sess, true)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// approve answers a pending approval of one runtime yes (/approve) or no
// (/deny), bound to its action digest and the capability's risk.
func (s *Server) approve(w http.ResponseWriter, r *http.Request, sess *session) {
	src, ok := s.one(sess, r)
	if !ok {
		s.refuseForm(w, r, sess, "approve or deny on a runtime of a tenant you are logged into")
		return
	}
	digest, risk, reason := r.PostFormValue("action_digest"), r.PostFormValue("risk"), strings.TrimSpace(r.PostFormValue("reason"))
	verb, what := "approve", "approve"
	var req any = wire.ApproveRequest{ActionDigest: digest, Risk: risk, ExpiresIn: "1h", Reason: reason}
	if r.URL.Path == "/deny" {
		verb, what = "deny", "deny"
		req = wire.DenyRequest{ActionDigest: digest, Risk: risk, Reason: reason}
	} else if e := r.PostFormValue("expires_in"); e != "" {
		req = wire.ApproveRequest{ActionDigest: digest, Risk: risk, ExpiresIn: e, Reason: reason}
	}
	ctx := context.WithoutCancel(r.Context())
	s.answered(w, r, sess, what+" "+short(digest), s.t.publish(ctx, []source{src}, s.through(sess), verb, req))
}

// confirm is a second operator's confirmation of a two-person request.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request, sess *session) {
	src, ok := s.one(sess, r)
	if !ok {
		s.refuseForm(w, r, sess, "confirm on a runtime of a tenant you are logged into")
		return
	}
	id := r.PostFormValue("request_id")
	ctx := context.WithoutCancel(r.Context())
	s.answered(w, r, sess, "confirm "+id, s.t.publish(ctx, []source{src}, s.through(sess), wire.VerbConfirm, wire.ConfirmRequest{RequestID: id}))
}

// guardrail sets (or removes) a guardrail on every runtime of the
// session's tenants (or of the one tenant the form names).
func (s *Server) guardrail(w http.ResponseWriter, r *http.Request, sess *session) {
	req := wire.GuardrailRequest{GuardrailID: strings.TrimSpace(r.PostFormValue("guardrail_id")), CapabilityID: strings.TrimSpace(r.PostFormValue("capability_id")),
		Reason: strings.TrimSpace(r.PostFormValue("reason")), Remove: r.PostFormValue("remove") == "true"}
	what := "remove guardrail " + req.GuardrailID
	if !req.Remove {
		what = "set guardrail " + req.GuardrailID
		switch r.PostFormValue("rule") {
		case "disabled":
			req.Disabled = true
		case "cap":
			n, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("max_amount")), 10, 64)
			if err != nil || n <= 0 {
				s.refuseForm(w, r, sess, "a cap per proposal is a positive whole number of the guarantee's unit")
				return
			}
			req.MaxAmount = n
		default:
			s.refuseForm(w, r, sess, "a guardrail either disables the capability or caps each proposal")
			return
		}
	}
	tenants := sessionTenants(sess, r.PostFormValue("tenant"))
	ctx := context.WithoutCancel(r.Context())
	s.answered(w, r, sess, what, s.t.publish(ctx, s.t.sources(tenants...), s.through(sess), kernel.VerbGuardrail, req))
}

// waiver grants (or, with revoke, ends) a waiver on every runtime of one
// tenant of the session.
func (s *Server) waiver(w http.ResponseWriter, r *http.Request, sess *session) {
	tenant := r.PostFormValue("tenant")
	if tenant == "" || sess.Login(tenant) == nil {
		s.refuseForm(w, r, sess, "a waiver is granted on a tenant you are logged into")
		return
	}
	req := wire.WaiverRequest{WaiverID: strings.TrimSpace(r.PostFormValue("waiver_id")), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	what := "revoke waiver " + req.WaiverID
	if r.PostFormValue("revoke") == "true" {
		req.Revoke = true
	} else {
		what = "grant waiver " + req.WaiverID
		req.GuardrailID = strings.TrimSpace(r.PostFormValue("guardrail_id"))
		target := strings.TrimSpace(r.PostFormValue("target"))
		switch r.PostFormValue("kind") {
		case "run":
			req.RunID = target
		case "resource":
			req.Resource = target
		default:
			s.refuseForm(w, r, sess, "a waiver names a run or a resource")
			return
		}
		d, err := time.ParseDuration(strings.TrimSpace(r.PostFormValue("for")))
		if err != nil || d <= 0 || d > maxWaiverFor {
			s.refuseForm(w, r, sess, "a waiver lasts a duration such as 30m or 4h, at most "+maxWaiverFor.String())
			return
		}
		req.Until = s.t.Now().Add(d).UTC().Format(time.RFC3339)
	}
	ctx := context.WithoutCancel(r.Context())
	s.answered(w, r, sess, what, s.t.publish(ctx, s.t.sources(tenant), s.through(sess), kernel.VerbWaiver, req))
}

// Tenants lists the tenants of the page's logins, for the forms.
func (p fleetPage) Tenants() []string {
	var out []string
	for _, l := range p.Logins {
		if !slices.Contains(out, l.Tenant) {
			out = append(out, l.Tenant)
		}
	}
	return out
}
