package daemon_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/interop"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestLitewitnessCosignsTheLog runs the documented procedure with a
// tlog-witness nobody on this project wrote: filippo.io/torchwood's
// litewitness, built from the module proxy, its key in a dedicated
// ssh-agent, each tenant's log registered with witnessctl add-log and
// add-key. The daemon, configured with it as [[runtime.witnesses]],
// applies two refunds; litewitness cosigns the checkpoints over HTTP
// (C2SP add-checkpoint, cosignature/v1), its own database holds the tree
// the daemon published, and the offline verifier accepts the export under
// a policy naming litewitness's key. Histories forged with the runtime
// key (the same size, and grown from another prefix) are refused by
// litewitness and called forks by the runtime's client. Then the
// insider's rewrite: the
// streams deleted and republished without the second refund. litewitness
// answers the restarted daemon's shorter log with 409 and its size, the
// daemon opens an integrity incident naming it, and the refund the
// rewritten history would let through is refused without a provider call.
func TestLitewitnessCosignsTheLog(t *testing.T) {
	bin := buildTools(t)
	lwBin := interop.BuildLitewitness(t)
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	cfg := testConfig(t, dir, hs.URL)
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pub := rt.Signer.Key.Public().(ed25519.PublicKey)
	rt.Close()

	lw := interop.StartLitewitness(t, lwBin, "witness.test/litewitness", logKeys(t, cfg, pub)...)
	if !strings.HasPrefix(lw.VKey, lw.Name+"+") {
		t.Fatalf("litewitness printed the key %q; want one named %q", lw.VKey, lw.Name)
	}
	cfg.Runtime.Witnesses = []config.WitnessConfig{{URL: lw.URL, Key: lw.VKey}}
	e := &env{t: t, prov: prov}
	var stop func()
	boot := func() {
		t.Helper()
		rt, err := bootConfig(t, cfg, daemontest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.rt, stop = rt, sync.OnceFunc(rt.Close)
		t.Cleanup(stop)
	}
	boot()
	waitWitnessed(t, e.rt)
	agent := e.client("acme", "agent_email")
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "refund-1", "ord_881", 40000)); r.Status != wire.StatusApplied {
		t.Fatalf("first refund: %+v", r)
	}
	ctx := context.Background()
	before, err := e.rt.Store.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "refund-2", "ord_881", 50000)); r.Status != wire.StatusApplied {
		t.Fatalf("second refund: %+v", r)
	}
	p := e.rt.Service.Projectors["acme"]
	cosigned := p.Status().Cosigned
	checkpointAll(t, e.rt)
	testenv.Eventually(t, func() bool {
		st, _ := e.rt.Service.Witnessing("acme")
		return p.Status().Cosigned > cosigned && st == kernel.WitnessCosigned
	}, 20*time.Second, "litewitness cosigned the checkpoint of both refunds")

	out := t.TempDir()
	entries, keys, newest := exportAcme(t, e.rt, out)
	cp, err := audit.ReadCheckpoint(newest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(newest, []byte("\n— "+lw.Name+" ")) {
		t.Fatalf("the newest checkpoint carries no line of litewitness:\n%s", newest)
	}
	origin := audit.Origin("acme")
	st, ok := lw.Logs(t)[origin]
	if !ok || st.Size != cp.Size || st.RootHash != base64.StdEncoding.EncodeToString(cp.Root[:]) {
		t.Fatalf("litewitness holds %+v for %s; want the daemon's checkpoint of %d records, root %x", st, origin, cp.Size, cp.Root)
	}
	if code, o := auditVerify(t, bin, "--entries", entries, "--keys", keys, "--witness-key", lw.VKey, "--witnesses", "1"); code != 0 {
		t.Fatalf("ctx audit-verify under litewitness's key: exit %d\n%s", code, o)
	}
	if code, o := auditVerify(t, bin, "--entries", entries, "--keys", keys, "--witness-key", lw.VKey, "--witnesses", "2"); code == 0 {
		t.Fatalf("ctx audit-verify asking two witnesses of one accepted:\n%s", o)
	}
	// An insider with the runtime key signs other histories: one of the
	// same size and one that grew from a different prefix. litewitness
	// refuses both (422: the consistency proof from what it cosigned does
	// not verify) and the runtime's client calls them forks.
	forger, err := audit.NewNoteSigner(origin, e.rt.Signer.Key)
	if err != nil {
		t.Fatal(err)
	}
	lwKey, err := audit.ParseCosignerKey(lw.VKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{cp.Size, cp.Size + 5} {
		var other audit.Tree
		for i := int64(0); i < size; i++ {
			if err := other.Append(audit.RecordHash(fmt.Appendf(nil, "another record %d", i))); err != nil {
				t.Fatal(err)
			}
		}
		root, err := other.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		forged, err := audit.SignCheckpoint(audit.Checkpoint{Origin: origin, Size: size, Root: root}, forger)
		if err != nil {
			t.Fatal(err)
		}
		_, err = (&witness.Client{URL: lw.URL, Key: lwKey}).Submit(ctx, witness.TreeProver{Tree: &other}, forged)
		var re *witness.RefusedError
		if !errors.As(err, &re) || re.Kind(size) != witness.RefusalForked {
			t.Fatalf("a forged history of %d records: %v; want litewitness to refuse it as a fork", size, err)
		}
	}
	if st := lw.Logs(t)[origin]; st.Size != cp.Size {
		t.Fatalf("litewitness now holds %+v; want the %d records it cosigned", st, cp.Size)
	}
	stop()
	agent.Close()

	// The insider's rewrite, without the second refund.
	republishUpTo(t, dir, before)
	boot()
	testenv.Eventually(t, func() bool {
		st, err := e.rt.Gateway.Integrity(ctx, "acme")
		return err == nil && st.Open != nil
	}, 20*time.Second, "the integrity incident")
	inc, _ := e.rt.Gateway.Integrity(ctx, "acme")
	if inc.Open.Kind != kernel.IntegrityShrank || inc.Open.Witness != lw.Name || inc.Open.WitnessSize != cp.Size || inc.Open.LogSize >= cp.Size {
		t.Fatalf("incident %+v; want litewitness's 409: it cosigned %d records, more than the rewritten log holds", inc.Open, cp.Size)
	}
	agent = e.client("acme", "agent_email")
	defer agent.Close()
	r := e.propose(agent, "acme", "agent_email", refund("run_2", "refund-3", "ord_881", 50000))
	if r.Status != wire.StatusRefused || r.Code != wire.CodeLogIntegrityFailed {
		t.Fatalf("a refund on the rewritten history: %+v; want log_integrity_failed", r)
	}
	if s := prov.Stats(); s.Calls != 2 || s.Applied != 2 {
		t.Fatalf("provider saw %+v; want the two refunds before the rewrite and nothing after", s)
	}
	if st := lw.Logs(t)[origin]; st.Size != cp.Size {
		t.Fatalf("litewitness now holds %+v; want the %d records it cosigned", st, cp.Size)
	}
}
