package projections

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// childEnv makes the test binary run an audit projector instead of the tests
// (see TestMain): the crash test SIGKILLs it.
const (
	childEnv    = "CTX_PROJECTIONS_CHILD"
	childURLEnv = "CTX_PROJECTIONS_URL"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "audit" {
		os.Exit(runAuditChild(os.Getenv(childURLEnv)))
	}
	os.Exit(m.Run())
}

// runAuditChild runs tenant acme's audit projector against the server at url
// until the process is killed.
func runAuditChild(url string) int {
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	p, err := NewAuditProjector(AuditConfig{Tenant: "acme", Events: events.NewJetStore(js, events.StreamName),
		Log: NewAuditLog(js, AuditStreamName), Signer: codec.NewSigner(testKey()), CheckpointEvery: 5,
		PollInterval: 2 * time.Millisecond, Notify: nc})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	_ = p.Run(context.Background())
	return 0
}

// TestAuditSurvivesSIGKILL runs the projector in a child process and kills
// it with SIGKILL at a random point while events keep arriving, three
// times; a final projector then catches up. Every event is recorded exactly
// once, the chain verifies, and the checkpoints agree with it.
func TestAuditSurvivesSIGKILL(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 9, []string{"r1", "r2", "r3"})
	d.appendN(t, 80)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	tail := func() int64 {
		r, ok, err := e.log.Tail(context.Background(), "acme")
		if err != nil || !ok {
			return 0
		}
		return r.Record.Index + 1
	}
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=audit", childURLEnv+"="+e.url)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		target := tail() + 1 + int64(rng.Intn(40))
		testenv.Eventually(t, func() bool {
			if _, err := d.step(context.Background()); err != nil {
				t.Fatal(err)
			}
			return tail() >= target
		}, 60*time.Second, "the child to record events")
		if err := cmd.Process.Kill(); err != nil { // SIGKILL on unix
			t.Fatal(err)
		}
		_ = cmd.Wait()
		t.Logf("round %d: killed at %d records", round, tail())
	}
	d.appendN(t, 10)
	p := e.projector(t, "acme", e.log, nil)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := checkExactlyOnce(t, e, "acme")
	if len(entries.Checkpoints) == 0 {
		t.Fatal("no checkpoints")
	}
}
