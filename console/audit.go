package console

import (
	"context"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
)

// auditResult is the outcome of verifying the tenant's exported audit
// chain, server-side, through the verifier.
type auditResult struct {
	At          string
	Records     int64
	Checkpoints int
	OK          bool
	Failure     string // the first bad record or checkpoint, and why
	Error       string // the export could not be made or read
	// Latest is the newest checkpoint of the export.
	Latest *checkpointView
	// Kill is the last kill switch change the verified chain records.
	Kill *KillChange
	// Authority is the tenant's authority subject folded from the verified
	// chain by the kernel (the operators' grants and revocations).
	Authority *kernel.Authority
	Keys      []string // the key ids the chain was checked against
	// Witnesses are the witnesses the runtime publishes (keys.json), and
	// Cosigned those whose cosignature of the newest checkpoint verified.
	Witnesses []string
	Cosigned  []string
}

type checkpointView struct {
	Origin string
	Size   int64
	Root   string
	Note   string
}

// verifyAudit exports the tenant's audit log through the operator's
// connection and verifies it against the keys the runtime publishes.
func verifyAudit(ctx context.Context, sess *session, now time.Time) *auditResult {
	res := &auditResult{At: now.UTC().Format(time.RFC3339)}
	oc := &client.AuditClient{NC: sess.login.Conns[""], Tenant: sess.tenant, Operator: sess.operator, Timeout: opTimeout}
	kb, err := oc.File(ctx, wire.VerbAuditKeys, nil)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	keys, err := audit.ParseKeys(kb)
	if err != nil {
		res.Error = "keys.json: " + err.Error()
		return res
	}
	for id := range keys.Keyring {
		res.Keys = append(res.Keys, id)
	}
	ws, err := keys.Cosigners()
	if err != nil {
		res.Error = "keys.json: " + err.Error()
		return res
	}
	for _, w := range ws {
		res.Witnesses = append(res.Witnesses, w.Name())
	}
	e, err := exportEntries(ctx, oc)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Records, res.Checkpoints = int64(len(e.Records)), len(e.Checkpoints)
	if n := len(e.Checkpoints); n > 0 {
		if cp, err := audit.ReadCheckpoint(e.Checkpoints[n-1]); err == nil {
			res.Latest = &checkpointView{Origin: cp.Origin, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Root[:]), Note: string(e.Checkpoints[n-1])}
		}
	}
	b, err := audit.MarshalEntries(e)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	// The live log: records past the newest checkpoint are checked as a
	// chain (an export for an auditor is cut at its newest checkpoint).
	vr, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{AllowPartial: true, Witnesses: ws})
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Cosigned = vr.Cosigned
	res.OK = vr.OK()
	if vr.Failure != nil {
		res.Failure = vr.Failure.Error()
		return res
	}
	res.Kill = LastKillSwitch(e)
	res.Authority = foldAuthority(e)
	return res
}

// foldAuthority folds the authority events of a verified export with the
// kernel's Authority.Apply.
func foldAuthority(e audit.Entries) *kernel.Authority {
	a := &kernel.Authority{}
	for _, raw := range e.Records {
		_, env, err := audit.Parse(raw)
		if err != nil || env.Type != kernel.TypeAuthorityChanged {
			continue
		}
		if ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body); err == nil {
			_ = a.Apply(ev) // a change the kernel refuses is not applied
		}
	}
	return a
}

// KillChange is a kill switch change: who, when and why, as the signed
// chain records it.
type KillChange struct {
	Engaged  bool
	Operator string
	Reason   string
	At       string // the event's time
}

// LastKillSwitch returns the last kill switch change recorded in a
// verified export, or nil if there is none.
func LastKillSwitch(e audit.Entries) *KillChange {
	var last *KillChange
	for _, raw := range e.Records {
		_, env, err := audit.Parse(raw)
		if err != nil || env.Type != kernel.TypeKillSwitchSet {
			continue
		}
		ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
		if k, ok := ev.(kernel.KillSwitchSet); err == nil && ok {
			last = &KillChange{Engaged: k.Engaged, Operator: k.Operator, Reason: k.Reason, At: env.Time}
		}
	}
	return last
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request, sess *session) {
	sess.mu.Lock()
	last := sess.audit
	sess.mu.Unlock()
	s.render(w, http.StatusOK, "audit", s.page(sess, "audit", "Audit", last))
}

// auditVerify exports and verifies the chain, one verification at a time
// per session; it returns to the audit page or, asked to, the kill switch's
// or authority's.
func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request, sess *session) {
	ret := "/audit"
	if to := r.PostFormValue("return"); to == "/kill-switch" || to == "/authority" {
		ret = to
	}
	sess.mu.Lock()
	busy := sess.verifying
	sess.verifying = true
	sess.mu.Unlock()
	if busy {
		http.Error(w, "a verification of this session is already running", http.StatusTooManyRequests)
		return
	}
	res := verifyAudit(r.Context(), sess, s.o.Now())
	sess.mu.Lock()
	sess.audit, sess.verifying = res, false
	sess.mu.Unlock()
	back(w, r, ret)
}

// exportEntries fetches the tenant's audit log as the verifier reads it.
func exportEntries(ctx context.Context, c *client.AuditClient) (audit.Entries, error) {
	e, err := c.ExportAudit(ctx)
	return audit.Entries(e), err
}
