package projections

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// testKey is the runtime key of every test (fixed, so child processes can
// rebuild it).
func testKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("contextos projections tests: runtime key"))
	return ed25519.NewKeyFromSeed(seed[:])
}

// env is a real embedded JetStream server with the event and audit streams.
type env struct {
	emb    *events.Embedded
	url    string
	nc     *nats.Conn
	js     jetstream.JetStream
	store  *events.JetStore
	log    *AuditLog
	signer codec.Signer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// The server runs in this process: a projector crash cannot lose its
	// acks, so it need not fsync.
	emb := testenv.Server(t, testenv.Options{Fsync: testenv.FsyncRelaxed})
	e := &env{emb: emb, url: emb.ClientURL(), signer: codec.NewSigner(testKey())}
	e.nc, e.js = e.connect(t)
	e.store = testenv.Store(t, e.js)
	if _, err := EnsureAuditStream(testenv.Context(t), e.js, AuditStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	e.log = NewAuditLog(e.js, AuditStreamName)
	return e
}

// connect opens a new connection (a replica has its own).
func (e *env) connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return testenv.Connect(t, e.url)
}

func (e *env) keys(t testing.TB, tenant string) audit.Keys {
	t.Helper()
	k, err := KeysFor(tenant, e.signer)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (e *env) projector(t testing.TB, tenant string, log *AuditLog, mod func(*AuditConfig)) *AuditProjector {
	t.Helper()
	cfg := AuditConfig{Tenant: tenant, Events: e.store, Log: log, Signer: e.signer, CheckpointEvery: 16, PollInterval: 5 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewAuditProjector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ids makes unique, valid ULIDs without a clock: a millisecond counter and
// a sequence number.
var idCounter atomic.Uint64

func nextID() string {
	n := idCounter.Add(1)
	var u ulid.ULID
	_ = u.SetTime(1_767_225_600_000 + n)
	binary.BigEndian.PutUint64(u[8:], n)
	return u.String()
}

// driver decides random exposure commands with the kernel and appends the
// signed events to a real store, like the gateway does: load, decide, append
// with the expected sequence, re-read and re-decide on conflict.
type driver struct {
	store   events.Store
	signer  codec.Signer
	tenant  string
	rng     *rand.Rand
	ledgers map[string]*resState // by subject: this writer's view
	subs    []string
	names   map[string]string // subject -> resource
	stats   map[string]int
	seed    int64
	n       int
}

type resState struct {
	ledger kernel.Ledger
	seq    uint64
}

func newDriver(e *env, tenant string, seed int64, resources []string) *driver {
	d := &driver{store: e.store, signer: e.signer, tenant: tenant, rng: rand.New(rand.NewSource(seed)), seed: seed,
		ledgers: map[string]*resState{}, names: map[string]string{}, stats: map[string]int{}}
	for _, r := range resources {
		s, err := codec.ExposureSubject(tenant, "refunds", r)
		if err != nil {
			panic(err)
		}
		d.subs = append(d.subs, s)
		d.names[s] = r
		d.ledgers[s] = &resState{}
	}
	return d
}

var outcomes = []kernel.Outcome{kernel.OutcomeApplied, kernel.OutcomeNotApplied, kernel.OutcomePending, kernel.OutcomeUnknown, kernel.OutcomePartial}

// step decides and appends one random command; it returns the number of
// events appended.
func (d *driver) step(ctx context.Context) (int, error) {
	subject := d.subs[d.rng.Intn(len(d.subs))]
	st := d.ledgers[subject]
	recs := st.ledger.Receipts
	pick := func() string {
		if len(recs) == 0 || d.rng.Intn(10) == 0 {
			return fmt.Sprintf("x%d-%d", d.seed, d.rng.Intn(1000)) // most likely unknown here
		}
		return recs[d.rng.Intn(len(recs))].AttemptID
	}
	var cmd kernel.Command
	switch k := d.rng.Intn(20); {
	case k < 5:
		d.n++
		a := fmt.Sprintf("w%d-%d", d.seed, d.n)
		op := "op-" + a
		if len(recs) > 0 && d.rng.Intn(10) == 0 {
			op = recs[d.rng.Intn(len(recs))].OperationID // a new attempt of an earlier operation
		}
		cmd = kernel.Reserve{GuaranteeID: "refunds", Resource: d.names[subject], AttemptID: a, OperationID: op,
			Amount: int64(1 + d.rng.Intn(2000)), Limit: 100000, DefinitionDigest: "def1"}
	case k < 9:
		cmd = kernel.StartDispatch{AttemptID: pick()}
	case k < 15:
		cmd = kernel.Observe{AttemptID: pick(), Outcome: outcomes[d.rng.Intn(len(outcomes))], Source: "provider"}
	case k < 17:
		cmd = kernel.Close{AttemptID: pick(), Reason: "test"}
	default:
		cmd = kernel.AssertAbsence{AttemptID: pick(), Operator: "ops", ArtifactRef: "ticket-1"}
	}
	for try := 0; try < 20; try++ {
		dec := kernel.DecideExposure(&st.ledger, cmd)
		if dec.Refusal != nil {
			d.stats[string(dec.Refusal.Code)]++
		}
		if len(dec.Events) == 0 {
			return 0, nil
		}
		envs := make([]codec.Envelope, len(dec.Events))
		for i, ev := range dec.Events {
			env, err := d.signer.Seal(ev.EventType(), kernel.EventVersion, nextID(), d.tenant, codec.FormatTime(time.Unix(1767225600, int64(i)).UTC()), ev)
			if err != nil {
				return 0, err
			}
			envs[i] = env
		}
		seq, err := d.store.Append(ctx, subject, st.seq, envs...)
		if errors.Is(err, events.ErrConflict) {
			if err := d.reload(ctx, subject); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, ev := range dec.Events {
			if err := st.ledger.Apply(ev); err != nil {
				return 0, err
			}
			d.stats[ev.EventType()]++
		}
		st.seq = seq
		return len(dec.Events), nil
	}
	return 0, errors.New("driver: contention exhausted")
}

// reload folds the subject's events this writer has not seen.
func (d *driver) reload(ctx context.Context, subject string) error {
	st := d.ledgers[subject]
	sts, err := d.store.Read(ctx, subject, st.seq+1)
	if err != nil {
		return err
	}
	for _, s := range sts {
		ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
		if err != nil {
			return err
		}
		if err := st.ledger.Apply(ev); err != nil {
			return err
		}
		st.seq = s.Seq
	}
	return nil
}

// appendN appends at least n events of the driver's tenant.
func (d *driver) appendN(t testing.TB, n int) {
	t.Helper()
	for got := 0; got < n; {
		k, err := d.step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got += k
	}
}

// tenantEvents returns the stored events of tenant, in stream order.
func tenantEvents(t testing.TB, store events.Store, tenant string) []events.Stored {
	t.Helper()
	var out []events.Stored
	var mu sync.Mutex
	prefix := codec.SubjectPrefix + tenant + "."
	if err := store.Replay(context.Background(), 1, func(st events.Stored) error {
		if len(st.Subject) > len(prefix) && st.Subject[:len(prefix)] == prefix {
			mu.Lock()
			out = append(out, st)
			mu.Unlock()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// serveVerbs subscribes the audit verbs on nc for every tenant, where no
// gateway runs (the runtime mounts Ops.Handler on its gateway instead).
func serveVerbs(ctx context.Context, o *Ops, nc *nats.Conn) ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for _, verb := range Verbs {
		verb := verb
		sub, err := nc.QueueSubscribe("ctx.v1.*.ops."+verb+".*", "contextos-projections", func(m *nats.Msg) {
			tok := strings.Split(m.Subject, ".")
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			b, err := json.Marshal(o.Handle(rctx, tok[2], verb, m.Data))
			if err != nil {
				b = []byte(`{"ok":false,"code":"projection_unavailable","reason":"reply encoding failed"}`)
			}
			_ = m.Respond(b)
		})
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, err
		}
		subs = append(subs, sub)
	}
	return subs, nc.Flush()
}
