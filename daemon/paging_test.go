package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// startApprovalEnv boots a runtime on the refund configuration (without
// the gateway tests' refusal window), where agent_chat may wire
// (bank.wire needs an approval) too, with /metrics and per-resource series.
func startApprovalEnv(t *testing.T) *env {
	t.Helper()
	return envOf(t, daemontest.Boot(t, daemontest.Options{Config: func(cfg *config.Config) {
		for i := range cfg.Tenants[0].Agents {
			if a := &cfg.Tenants[0].Agents[i]; a.ID == "agent_chat" {
				a.Capabilities = append(a.Capabilities, "bank.wire")
			}
		}
		cfg.Runtime.MetricsListen = "127.0.0.1:0"
		cfg.Runtime.MetricsResourceSeries = 100
	}}))
}

// hugeID is the i-th resource id of 60 KB; all of them share their first
// ShortenAbove bytes, so only their digests tell them apart in a view.
func hugeID(i int) string { return strings.Repeat("o", 60<<10) + fmt.Sprintf("%05d", i) }

func bankWire(run, key string, args map[string]any) map[string]any {
	return map[string]any{"run_id": run, "operation_key": key, "capability_id": "bank.wire", "arguments": args}
}

// walk pages through a list verb as ops_alice from req (limit, filters),
// checking that every reply came and is within the reply budget, and
// returns the rows of member.
func walk(t *testing.T, nc *nats.Conn, verb string, req map[string]any, member string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for pages := 1; ; pages++ {
		b, _ := json.Marshal(req)
		m, err := nc.Request(wire.OpSubject("acme", verb, "ops_alice"), b, 10*time.Second)
		if err != nil {
			t.Fatalf("%s %s: no reply (%v): the operators see nothing", verb, b, err)
		}
		if len(m.Data) > wire.MaxReplyBudget {
			t.Fatalf("%s page %d: %d bytes, over the reply budget %d", verb, pages, len(m.Data), wire.MaxReplyBudget)
		}
		var r struct {
			OK         bool             `json:"ok"`
			Code       wire.Code        `json:"code"`
			Reason     string           `json:"reason"`
			NextCursor string           `json:"next_cursor"`
			Rows       []map[string]any `json:"-"`
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(m.Data, &r); err != nil || json.Unmarshal(m.Data, &all) != nil {
			t.Fatalf("%s: %v: %.300s", verb, err, m.Data)
		}
		if !r.OK {
			t.Fatalf("%s %s: refused %s: %s", verb, b, r.Code, r.Reason)
		}
		if raw, ok := all[member]; ok {
			if err := json.Unmarshal(raw, &r.Rows); err != nil {
				t.Fatal(err)
			}
		}
		rows = append(rows, r.Rows...)
		t.Logf("%s %s page %d: %d rows, %d bytes", verb, b, pages, len(r.Rows), len(m.Data))
		if r.NextCursor == "" {
			return rows
		}
		if pages > 1000 {
			t.Fatalf("%s: no last page", verb)
		}
		req["cursor"] = r.NextCursor
	}
}

// TestOneAgentCannotBlindTheOperators: one agent opens 25 pending refunds
// and 25 approval requests, each with a resource id (and an argument) of
// 60 KB. The approvals, attempts and exposure verbs still answer, every
// reply within the reply budget, the long ids shortened with their
// digests; paging through (by the default page and by pages of 7) lists
// every row exactly once, another agent's approval request among them; and
// an operator filters and tombstones by a shortened resource's digest.
func TestOneAgentCannotBlindTheOperators(t *testing.T) {
	e := startApprovalEnv(t)
	const n = 25
	modes := make([]provider.Mode, n)
	for i := range modes {
		modes[i] = provider.Pending
	}
	e.prov.Script(modes...)
	email := e.client("acme", "agent_email")
	for i := 0; i < n; i++ {
		if r := e.propose(email, "acme", "agent_email", refund("run_flood", fmt.Sprint("r", i), hugeID(i), 100)); r.Status != wire.StatusPending {
			t.Fatalf("refund %d: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
		if r := e.propose(email, "acme", "agent_email", bankWire("run_flood", fmt.Sprint("w", i), map[string]any{"to": hugeID(i)})); r.Code != wire.CodeApprovalRequired {
			t.Fatalf("wire %d: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
	}
	mine := e.propose(e.client("acme", "agent_chat"), "acme", "agent_chat", bankWire("run_chat", "w1", map[string]any{"to": "acct_42", "amount": 1}))
	if mine.Code != wire.CodeApprovalRequired {
		t.Fatalf("agent_chat's wire: %+v", mine)
	}
	ops := e.client("acme", "ops_alice")

	for _, limit := range []int{0, 7} {
		req := func() map[string]any {
			if limit == 0 {
				return map[string]any{}
			}
			return map[string]any{"limit": limit}
		}
		approvals := walk(t, ops, "approvals", req(), "approvals")
		byDigest := map[string]int{}
		for _, a := range approvals {
			byDigest[a["action_digest"].(string)]++
			if b, _ := json.Marshal(a); len(b) > 2048 {
				t.Errorf("an approval row of %d bytes: %.200s", len(b), b)
			}
		}
		if len(approvals) != n+1 || len(byDigest) != n+1 || byDigest[mine.ActionDigest] != 1 {
			t.Fatalf("limit %d: %d approvals listed, %d distinct, agent_chat's %d times", limit, len(approvals), len(byDigest), byDigest[mine.ActionDigest])
		}
		if last := approvals[n]; last["principal"] != "agent_chat" || last["action_digest"] != mine.ActionDigest {
			t.Fatalf("the newest request is not agent_chat's: %v", last)
		}

		attempts := walk(t, ops, "attempts", req(), "attempts")
		byID, byRes := map[string]int{}, map[string]int{}
		for _, a := range attempts {
			byID[a["attempt_id"].(string)]++
			d, _ := a["resource_digest"].(string)
			byRes[d]++
			if res := a["resource"].(string); len(res) > wire.ShortPrefix+len(wire.Ellipsis) || !strings.HasSuffix(res, wire.Ellipsis) {
				t.Fatalf("attempt resource shown as %d bytes", len(res))
			}
		}
		if len(attempts) != n || len(byID) != n {
			t.Fatalf("limit %d: %d attempts listed, %d distinct", limit, len(attempts), len(byID))
		}
		exposure := walk(t, ops, "exposure", req(), "exposure")
		byExp := map[string]int{}
		for _, r := range exposure {
			byExp[r["resource_digest"].(string)]++
		}
		for i := 0; i < n; i++ {
			d := wire.Digest(hugeID(i))
			if byRes[d] != 1 || byExp[d] != 1 {
				t.Fatalf("limit %d: resource %d listed %d times in attempts, %d in exposure", limit, i, byRes[d], byExp[d])
			}
		}
		if len(exposure) != n {
			t.Fatalf("limit %d: %d exposure rows", limit, len(exposure))
		}
	}

	d := wire.Digest(hugeID(3))
	one := walk(t, ops, "exposure", map[string]any{"resource_digest": d}, "exposure")
	if len(one) != 1 || one[0]["resource_digest"] != d || one[0]["held"] != float64(100) {
		t.Fatalf("exposure by digest: %v", one)
	}
	r := e.op("close-attempt", wire.OpRequest{AttemptID: "ghost", GuaranteeID: "refunds-per-order", ResourceDigest: d, Reason: "tombstone"})
	if !r.OK || len(r.Exposure) != 1 || r.Exposure[0].ResourceDigest != d || r.Exposure[0].Held != 100 {
		t.Fatalf("tombstone by digest: %+v", r)
	}
	if r := e.op("close-attempt", wire.OpRequest{AttemptID: "ghost2", GuaranteeID: "refunds-per-order", ResourceDigest: strings.Repeat("0", 64)}); r.OK || r.Code != wire.CodeRequestMalformed {
		t.Fatalf("tombstone by an unknown digest: %+v", r)
	}
	for _, bad := range []wire.OpRequest{{Limit: wire.MaxPageLimit + 1}, {Cursor: "e.x"}, {Resource: "ord_1", ResourceDigest: d}} {
		if r := e.op("exposure", bad); r.OK || r.Code != wire.CodeRequestMalformed {
			t.Fatalf("exposure %+v: %+v", bad, r)
		}
	}
}

// TestMetricsBoundedInBytes: ten resources of 60 KB ids, each with its
// per-resource series, leave /metrics under 100 KB (each id is a label
// shortened, with its digest); the series still tell the resources apart.
func TestMetricsBoundedInBytes(t *testing.T) {
	e := startApprovalEnv(t)
	email := e.client("acme", "agent_email")
	size := func() int {
		resp, err := http.Get(e.rt.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	before := size()
	for i := 0; i < 10; i++ {
		if r := e.propose(email, "acme", "agent_email", refund("run_m", fmt.Sprint("m", i), hugeID(i), 100)); r.Status != wire.StatusApplied {
			t.Fatalf("refund %d: %+v", i, r)
		}
	}
	after := size()
	t.Logf("/metrics: %d bytes before, %d after ten resources of 60 KB ids", before, after)
	if after > 100<<10 {
		t.Fatalf("/metrics is %d bytes with ten 60 KB resource ids", after)
	}
	fams := scrape(t, e.rt)
	var digests []string
	for _, m := range fams["contextos_exposure_committed"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource_digest" && l.GetValue() != "" {
				digests = append(digests, l.GetValue())
			}
		}
	}
	slices.Sort(digests)
	if len(digests) != 10 || len(slices.Compact(digests)) != 10 || !slices.Contains(digests, wire.Digest(hugeID(7))) {
		t.Fatalf("resource_digest labels: %v", digests)
	}
}

// TestAttemptsPagesWith1000HugeIDs measures the attempts verb over 1,000
// open attempts whose resource ids are 60 KB each (60 MB of ids): it logs
// each page's bytes and the number of pages, and checks that every page is
// within the reply budget and that paging through lists every attempt
// exactly once.
func TestAttemptsPagesWith1000HugeIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("60 MB of reservations")
	}
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	const attempts = 1000
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, func(c *config.Config) { c.NATS.Sync = "relaxed" })
	ctx := context.Background()
	eng := e.rt.Gateway.Engine()
	def := e.rt.Config.Guarantees[0]
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < attempts; i += 16 {
				id := hugeID(i)
				res, _, err := eng.Exposure(ctx, "acme", def.ID, id, kernel.Reserve{GuaranteeID: def.ID, Resource: id,
					AttemptID: fmt.Sprintf("att_%05d", i), OperationID: fmt.Sprintf("op_%05d", i), Amount: 1, Limit: def.Limit, DefinitionDigest: def.Digest()})
				if err == nil && res.Refusal != nil {
					err = res.Refusal
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ops := e.client("acme", "ops_alice")
	for _, limit := range []int{0, wire.MaxPageLimit} {
		start := time.Now()
		req := map[string]any{}
		if limit != 0 {
			req["limit"] = limit
		}
		rows := walk(t, ops, "attempts", req, "attempts")
		seen := map[string]bool{}
		for _, r := range rows {
			seen[r["attempt_id"].(string)] = true
		}
		if len(rows) != attempts || len(seen) != attempts {
			t.Fatalf("limit %d: %d rows, %d attempts", limit, len(rows), len(seen))
		}
		t.Logf("limit %d: %d attempts of 60 KB ids in %s", limit, attempts, time.Since(start))
	}
}

// TestUnsentReplyIsLoggedAndCounted: on a NATS server whose max_payload
// (1,536 bytes) is smaller than one row of the attempts view (a resource id
// of 256 '<', which JSON writes as 1,536 bytes), the reply cannot be
// published: the runtime logs it at error level with the tenant and verb,
// counts it in contextos_replies_unsent_total, and the operator gets a
// small refusal reply_too_large instead of silence.
func TestUnsentReplyIsLoggedAndCounted(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	url := startDocsServerWith(t, "max_payload: 1536\n", docsAuthorization(t))
	cfg := externalConfig(t, url, hs.URL)
	cfg.Runtime.MetricsListen = "127.0.0.1:0"
	cfg.Runtime.LogFormat = "json"
	logs := &logBuf{}
	rt, err := bootConfig(t, cfg, daemontest.Options{Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	e := &env{t: t, rt: rt}
	def := cfg.Guarantees[0]
	id := strings.Repeat("<", 256)
	res, _, err := rt.Gateway.Engine().Exposure(context.Background(), "acme", def.ID, id, kernel.Reserve{GuaranteeID: def.ID, Resource: id,
		AttemptID: "att_lt", OperationID: "op_lt", Amount: 1, Limit: def.Limit, DefinitionDigest: def.Digest()})
	if err != nil || res.Refusal != nil {
		t.Fatalf("reserve: %v %v", err, res.Refusal)
	}
	testenv.Eventually(t, func() bool { return len(rt.Gateway.Model().OpenAttempts("acme")) == 1 }, 10*time.Second, "the read model to fold the reservation")
	r := e.op("attempts", wire.OpRequest{})
	if r.OK || r.Code != wire.CodeReplyTooLarge || !strings.Contains(r.Reason, "max_payload of 1536") {
		t.Fatalf("attempts: %+v", r)
	}
	logs.waitLine(t, "reply not sent", map[string]any{"level": "ERROR", "tenant": "acme", "verb": "attempts", "requester": "ops_alice", "reason": "too_large"})
	if v, ok := sample(scrape(t, rt), "contextos_replies_unsent_total", map[string]string{"tenant": "acme", "verb": "attempts", "reason": "too_large"}); !ok || v != 1 {
		t.Fatalf("contextos_replies_unsent_total: %v %v", v, ok)
	}
	// A small reply still goes: the kill switch's state.
	if r := e.op("kill-switch", wire.OpRequest{}); !r.OK {
		t.Fatalf("kill-switch: %+v", r)
	}
}
