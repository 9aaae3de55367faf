package chaos

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// TestKillSwitchOnACutReplica: two contextosd processes on one nats-server
// process, replica B behind a TCP proxy. B serves a proposal with the
// switch released (its warm state holds that), then the proxy cuts B off
// while an operator engages the kill switch through A, so B never hears
// the notification. A is then SIGKILLed and the proxy healed: every
// request now reaches B alone, and none of 100 proposals may reach the
// provider, because the reserve decision reads the control subject guarded
// by its sequence, not a copy in memory.
func TestKillSwitchOnACutReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns nats-server and contextosd processes")
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	prov := provider.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: prov.Handler()}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	_, key, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "runtime.key")
	if err := codec.SavePrivateKey(keyPath, key); err != nil {
		t.Fatal(err)
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	proxy := testenv.NewCutProxy(t, strings.TrimPrefix(natsURL, "nats://"))
	r := &run{o: Options{Agents: 1}, pw: "ks-runtime-secret", urls: []string{natsURL}}
	write := func(name, url string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(r.config("http://"+ln.Addr().String(), url, keyPath, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgA, cfgB := write("a.toml", natsURL), write("b.toml", proxy.URL())
	procs := []*Proc{
		{Name: "natsd", path: filepath.Join(bin, "natsd"), ready: "natsd ready",
			args: []string{"-config", cfgA, "-runtime-password", r.pw, "-port", fmt.Sprint(ports[0]), "-store", filepath.Join(dir, "nats")}},
		{Name: "contextosd-b", path: filepath.Join(bin, "contextosd"), args: []string{"--config", cfgB}, ready: "contextosd ready"},
		{Name: "contextosd-a", path: filepath.Join(bin, "contextosd"), args: []string{"--config", cfgA}, ready: "contextosd ready"},
	}
	for _, p := range procs {
		p.log = filepath.Join(dir, p.Name+".log")
		t.Cleanup(p.Kill)
	}
	natsd, b, a := procs[0], procs[1], procs[2]
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				log, _ := os.ReadFile(p.log)
				t.Logf("%s:\n%s", p.Name, log)
			}
		}
	})
	if err := natsd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.waitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	d := NewDriver(natsURL, "acme", guaranteeID, limit)
	agent, err := d.Connect(agentID(1), "pw-"+agentID(1)+"-passphrase")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	op, err := d.Connect(operatorID, operatorPW)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	// B alone serves the warm-up: it decides once with the switch released.
	if rep, err := agent.Propose(agent.NewProposal("run_ks", "warm", "ord_warm", 100), 10*time.Second); err != nil || rep.Status != wire.StatusApplied {
		t.Fatalf("warm-up through B: %+v %v", rep, err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	proxy.SetCut(true)
	engaged := true
	// An engage the server routed to B before it saw B's connection close
	// is lost with that connection; the engage is idempotent, so it is
	// sent again until A answers it.
	testenv.Eventually(t, func() bool {
		rep, err := op.op("kill-switch", wire.OpRequest{Engaged: &engaged, Reason: "incident drill"}, 3*time.Second)
		return err == nil && rep.OK
	}, 30*time.Second, "the engage through A")
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	proxy.SetCut(false)
	// B's connections reconnect one by one; until its proposal
	// subscription is back the server answers "no responders". Until the
	// server has read the end of A's (or B's old) connection it may still
	// route a request to that dead subscription, where it is lost and the
	// agent's request times out. Both deliver the proposal to nobody, so
	// only answered proposals count; whether any proposal, answered or
	// not, reached the provider is what the provider's count says.
	before := prov.Stats().Calls
	answered, lost := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; answered < 100 && time.Now().Before(deadline); i++ {
		rep, err := agent.Propose(agent.NewProposal("run_ks", fmt.Sprint("k", i), fmt.Sprint("ord_", i), 100), 5*time.Second)
		if errors.Is(err, nats.ErrNoResponders) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if errors.Is(err, nats.ErrTimeout) && answered == 0 && lost < 3 {
			lost++
			t.Logf("proposal %d through B: no reply (a subscription the server had not yet dropped)", i)
			continue
		}
		answered++
		if err != nil || rep.Status != wire.StatusRefused || rep.Code != wire.CodeKillSwitchEngaged {
			t.Errorf("proposal %d through B: %+v %v", i, rep, err)
		}
	}
	if answered < 100 {
		t.Fatalf("replica B answered %d of 100 proposals in 60 s", answered)
	}
	if got := prov.Stats().Calls - before; got != 0 {
		t.Fatalf("%d of 100 proposals through the cut replica reached the provider", got)
	}
}
