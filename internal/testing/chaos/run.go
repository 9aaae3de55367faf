package chaos

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/lincheck"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Mode is the NATS topology of a run.
type Mode string

// Modes.
const (
	// ModeSingle runs one nats-server process (JetStream, file storage,
	// fsync always) and R1 streams.
	ModeSingle Mode = "single"
	// ModeCluster runs a 3-node JetStream cluster of nats-server
	// processes on loopback and R3 streams.
	ModeCluster Mode = "cluster"
)

// Fault kinds, as the table names them.
const (
	FaultKillRandom        = "sigkill contextosd at a random point"
	FaultKillDispatchStart = "sigkill contextosd after dispatch-start"
	FaultKillProviderCall  = "sigkill contextosd after the provider call"
	FaultPause             = "sigstop/sigcont contextosd"
	FaultNATSRestart       = "sigkill + restart of a nats-server"
	FaultProviderLate      = "provider answered after the timeout"
	FaultProviderPending   = "provider answered pending"
	FaultProviderConflict  = "provider answered 409"
)

const (
	guaranteeID     = refundcfg.Guarantee
	limit           = refundcfg.Limit
	providerTimeout = time.Second
	operatorID      = "ops_chaos"
	operatorPW      = "ops-chaos-secret"
)

// Options configure Run. Zero values take the defaults.
type Options struct {
	Mode       Mode
	Duration   time.Duration // the load phase (default 60s)
	Daemons    int           // contextosd processes (default 3)
	Agents     int           // agents (default 8)
	Workers    int           // connections per agent (default 2)
	Resources  int           // orders (default 300)
	FaultEvery time.Duration // mean time between faults (default 3s)
	Seed       uint64        // default 1
	Dir        string        // work directory (default a temporary one, removed when the run passes)
	Bin        string        // directory with contextosd and natsd (default: built into Dir)
	Log        io.Writer     // progress (default discard)
	// Ownership turns [nats.ownership] on: the tenant's partition has one
	// owning contextosd, the others forward its requests there, and a
	// killed owner's requests are handled where they land until its claim
	// expires (docs/replicas.md).
	Ownership bool
}

func (o *Options) defaults() {
	if o.Mode == "" {
		o.Mode = ModeSingle
	}
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
	}
	if o.Daemons == 0 {
		o.Daemons = 3
	}
	if o.Agents == 0 {
		o.Agents = 8
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.Resources == 0 {
		o.Resources = 300
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 3 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Result is what a run found.
type Result struct {
	Options           Options
	Elapsed           time.Duration
	Operations        map[lincheck.Kind]int // recorded operations by kind (reserve = proposals)
	Replies           map[string]int
	Faults            map[string]int
	BalancesChecked   int
	CeilingViolations []string
	Lin               lincheck.Result
	Acct              Accounting
	StreamEvents      int
	BadSignatures     []string
	FoldErrors        []string
	Incidents         int
	StrandedBefore    [2]int64 // attempts, amount
	StrandedAfter     [2]int64
	FinalizeRounds    int
	FinalizeErr       error
	AuditLog          AuditLogCheck // the signed audit log, read and verified at the end
	Dir               string
}

// OK reports whether every check held.
func (r *Result) OK() bool {
	return len(r.CeilingViolations) == 0 && r.Lin.OK && len(r.Acct.Violations()) == 0 && len(r.BadSignatures) == 0 &&
		len(r.FoldErrors) == 0 && r.StrandedAfter[0] == 0 && r.FinalizeErr == nil && r.AuditLog.Err == nil
}

type run struct {
	o       Options
	dir     string
	pw      string
	cfgPath string
	nats    []*Proc
	urls    []string
	daemons []*Proc
	prov    *provider.Server
	answers *answerCounter
	mu      sync.Mutex
	faults  map[string]int
	bg      sync.WaitGroup
	rng     *rand.Rand
	key     ed25519.PrivateKey
	hs      *http.Server
	armed   map[*Proc]bool
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "chaos %s: "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (r *run) fault(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
}

// Run runs one chaos scenario end to end and reports what it found. An
// error means the harness itself failed (build, startup); violations are
// in the Result.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	start := time.Now()
	r := &run{o: o, faults: map[string]int{}, armed: map[*Proc]bool{}, rng: rand.New(rand.NewPCG(o.Seed, 99))}
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "contextos-chaos-"); err != nil {
			return nil, err
		}
	}
	r.dir = dir
	defer r.stopAll()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	res, err := r.exercise(ctx)
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	res.Dir = dir
	res.Options = o
	return res, nil
}

func (r *run) setup(ctx context.Context) error {
	bin := r.o.Bin
	if bin == "" {
		bin = filepath.Join(r.dir, "bin")
		root, err := ModuleRoot()
		if err != nil {
			return err
		}
		r.logf("building contextosd and natsd")
		if err := Build(ctx, root, bin); err != nil {
			return err
		}
	}
	// The provider: a real HTTP server on loopback, in this process so that
	// its records are the ground truth of the accounting.
	r.prov = provider.New()
	r.prov.Delay = 3 * providerTimeout
	r.answers = &answerCounter{h: r.prov.Handler(), late: providerTimeout}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.hs = &http.Server{Handler: r.answers}
	go func() { _ = r.hs.Serve(ln) }()
	provURL := "http://" + ln.Addr().String()
	var modes []provider.Mode
	for i := 0; i < 20000; i++ {
		switch x := r.rng.IntN(100); {
		case x < 5:
			modes = append(modes, provider.Timeout)
		case x < 13:
			modes = append(modes, provider.Pending)
		case x < 17:
			modes = append(modes, provider.Failed)
		case x < 19:
			modes = append(modes, provider.Conflict)
		default:
			modes = append(modes, provider.Applied)
		}
	}
	r.prov.Script(modes...)

	// One runtime key for every daemon, made before any starts.
	pub, key, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		return err
	}
	_ = pub
	r.key = key
	keyPath := filepath.Join(r.dir, "runtime.key")
	if err := codec.SavePrivateKey(keyPath, key); err != nil && !os.IsExist(err) {
		return err
	}
	pwb := make([]byte, 12)
	_, _ = crand.Read(pwb)
	r.pw = fmt.Sprintf("%x", pwb)

	nodes := 1
	if r.o.Mode == ModeCluster {
		nodes = 3
	}
	ports, err := testenv.FreePorts(2 * nodes)
	if err != nil {
		return err
	}
	var routes []string
	for i := 0; i < nodes; i++ {
		r.urls = append(r.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[nodes+i]))
	}
	replicas := 1
	if r.o.Mode == ModeCluster {
		replicas = 3
	}
	r.cfgPath = filepath.Join(r.dir, "contextos.toml")
	if err := os.WriteFile(r.cfgPath, []byte(r.config(provURL, strings.Join(r.urls, ","), keyPath, replicas)), 0o600); err != nil {
		return err
	}
	if _, err := config.Load(r.cfgPath); err != nil {
		return fmt.Errorf("chaos config: %w", err)
	}
	for i := 0; i < nodes; i++ {
		args := []string{"-config", r.cfgPath, "-runtime-password", r.pw, "-port", fmt.Sprint(ports[i]),
			"-store", filepath.Join(r.dir, fmt.Sprintf("nats%d", i+1)), "-name", fmt.Sprintf("n%d", i+1)}
		if nodes > 1 {
			args = append(args, "-cluster-port", fmt.Sprint(ports[nodes+i]), "-routes", strings.Join(routes, ","))
		}
		r.nats = append(r.nats, &Proc{Name: fmt.Sprintf("natsd-%d", i+1), path: filepath.Join(bin, "natsd"), args: args,
			log: filepath.Join(r.dir, fmt.Sprintf("natsd-%d.log", i+1)), ready: "natsd ready"})
	}
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i, p := range r.nats {
		wg.Add(1)
		go func(i int, p *Proc) { defer wg.Done(); errs[i] = p.Start() }(i, p)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := r.waitJetStream(ctx); err != nil {
		return err
	}
	r.logf("%d nats-server process(es) ready: %s", nodes, strings.Join(r.urls, ","))
	for i := 0; i < r.o.Daemons; i++ {
		d := &Proc{Name: fmt.Sprintf("contextosd-%d", i+1), path: filepath.Join(bin, "contextosd"), args: []string{"--config", r.cfgPath},
			log: filepath.Join(r.dir, fmt.Sprintf("contextosd-%d.log", i+1)), ready: "contextosd ready"}
		r.daemons = append(r.daemons, d)
		if err := r.startDaemon(ctx, d); err != nil {
			return err
		}
	}
	r.logf("%d contextosd processes ready", r.o.Daemons)
	return nil
}

// waitJetStream waits until JetStream answers (a cluster has elected its
// meta leader), so that the daemons' first boot can create the stream.
func (r *run) waitJetStream(ctx context.Context) error {
	nc, err := nats.Connect(strings.Join(r.urls, ","), nats.UserInfo(gateway.RuntimeUser, r.pw), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("JetStream not ready: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// startDaemon starts d, retrying while NATS is not ready for it (a
// restarting node, a cluster electing its leaders).
func (r *run) startDaemon(ctx context.Context, d *Proc, env ...string) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := d.Start(env...)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (r *run) config(provURL, urls, keyPath string, replicas int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[nats]\nurl = %q\nuser = %q\npassword = %q\nreply_user = %q\nreply_password = %q\nreplicas = %d\n\n",
		urls, gateway.RuntimeUser, r.pw, gateway.ReplyUser, r.pw, replicas)
	if r.o.Ownership {
		b.WriteString("[nats.ownership]\nenabled = true\n\n")
	}
	fmt.Fprintf(&b, "[runtime]\nkey_file = %q\nreconcile_interval = \"0s\"\n\n", keyPath)
	fmt.Fprintf(&b, "[[tenants]]\nid = \"acme\"\nunadmitted_runs = \"unlimited\"\n")
	for i := 1; i <= r.o.Agents; i++ {
		fmt.Fprintf(&b, "\n  [[tenants.agents]]\n  id = %q\n  password = %q\n  capabilities = [%q]\n", agentID(i), "pw-"+agentID(i)+"-passphrase", Capability)
	}
	fmt.Fprintf(&b, "\n  [[tenants.operators]]\n  id = %q\n  password = %q\n\n", operatorID, operatorPW)
	// The refund and its per-order ceiling are the tests' one refund
	// configuration, the refund with the run's provider timeout.
	text := refundcfg.Replace(refundcfg.Refund(provURL), `timeout = "500ms"`, fmt.Sprintf("timeout = %q", providerTimeout.String()))
	// A second, windowed ceiling on every refund (per order per day in a
	// time zone), never the binding one: every proposal reserves on two
	// ledgers atomically, and the audit checks the day's ledgers like the
	// others.
	text = refundcfg.Derive(text, "guarantees", guaranteeID, "refunds-per-order-day",
		fmt.Sprintf("limit = %d\n", limit), fmt.Sprintf("limit = %d\nwindow = \"day\"\ntime_zone = \"Asia/Kolkata\"\n", 2*limit))
	b.WriteString(text)
	return b.String()
}

func agentID(i int) string { return fmt.Sprintf("agent_%02d", i) }

func (r *run) stopAll() {
	r.bg.Wait()
	if r.hs != nil {
		r.hs.Close()
	}
	for _, d := range r.daemons {
		d.Kill()
	}
	for _, n := range r.nats {
		n.Kill()
	}
}

func (r *run) exercise(ctx context.Context) (*Result, error) {
	res := &Result{Faults: map[string]int{}}
	d := NewDriver(strings.Join(r.urls, ","), "acme", guaranteeID, limit)
	agents := map[string]string{}
	for i := 1; i <= r.o.Agents; i++ {
		agents[agentID(i)] = "pw-" + agentID(i) + "-passphrase"
	}
	var orders []string
	for i := 0; i < r.o.Resources; i++ {
		orders = append(orders, fmt.Sprintf("ord_%04d", i))
	}
	load := Load{Agents: agents, Resources: orders, Amounts: []int64{5000, 10000, 20000, 30000, 45000, 60000},
		PerAgent: 1 << 30, Workers: r.o.Workers, Timeout: 8 * time.Second, Short: 300 * time.Millisecond, ShortRate: 0.03,
		ResendRate: 0.08, Reads: 1 << 30, ReadWorkers: 2, Operator: [2]string{operatorID, operatorPW}, Seed: r.o.Seed}
	loadCtx, cancel := context.WithTimeout(ctx, r.o.Duration)
	defer cancel()
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); r.injectFaults(loadCtx) }()
	r.logf("load: %d agents x %d connections over %d orders for %s, a fault every ~%s", r.o.Agents, r.o.Workers, r.o.Resources, r.o.Duration, r.o.FaultEvery)
	if err := d.Run(loadCtx, load); err != nil {
		return nil, err
	}
	<-faultsDone
	r.bg.Wait()
	if err := r.heal(ctx); err != nil {
		return nil, err
	}
	r.logf("load over (%d operations recorded); every process up; waiting out in-flight calls", d.H.Len())
	quiet := 2*providerTimeout + 2*time.Second
	time.Sleep(quiet)

	store, nc, err := r.store()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	keys := codec.Keyring{}
	keys.Add(r.key.Public().(ed25519.PublicKey))
	before, err := lincheck.Audit(ctx, store, keys)
	if err != nil {
		return nil, fmt.Errorf("audit before reconciliation: %w", err)
	}
	n, amt := before.Stranded()
	res.StrandedBefore = [2]int64{int64(n), amt}
	r.logf("stranded before reconciliation: %d attempts, %d", n, amt)

	op, err := d.Connect(operatorID, operatorPW)
	if err != nil {
		return nil, err
	}
	defer op.Close()
	res.FinalizeRounds, res.FinalizeErr = d.Finalize(ctx, op, r.prov, quiet, time.Now().Add(3*time.Minute))
	for _, o := range orders {
		if _, err := op.Read(o, 10*time.Second); err != nil {
			return nil, fmt.Errorf("final read of %s: %w", o, err)
		}
	}
	after, err := lincheck.Audit(ctx, store, keys)
	if err != nil {
		return nil, fmt.Errorf("audit after reconciliation: %w", err)
	}
	n, amt = after.Stranded()
	res.StrandedAfter = [2]int64{int64(n), amt}
	res.StreamEvents, res.BadSignatures, res.FoldErrors, res.Incidents = after.Events, after.BadSignatures, after.FoldErrors, after.Incidents
	ops := d.Operations(after.Attempts)
	res.Operations = map[lincheck.Kind]int{}
	for _, o := range ops {
		in := o.Input.(lincheck.Input)
		res.Operations[in.Kind]++
		if o.Output.(lincheck.Output).HasBalance {
			res.BalancesChecked++
		}
	}
	res.CeilingViolations = append(lincheck.BalanceViolations(ops), after.CeilingViolations...)
	_ = lincheck.Save(filepath.Join(r.dir, "history.json"), ops)
	r.logf("checking linearizability of %d operations", len(ops))
	res.Lin = lincheck.Check(ops, 2*time.Minute, r.dir)
	r.logf("linearizability: %s", res.Lin)
	res.Acct = Account(after, r.prov, d.Acks(), "acme", guaranteeID, limit)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	r.logf("waiting for the audit log to record every event, then verifying it")
	res.AuditLog = checkAuditLog(ctx, store, js, "acme", r.key.Public().(ed25519.PublicKey), time.Now().Add(3*time.Minute))
	res.Replies = d.Counts()
	r.mu.Lock()
	for k, v := range r.faults {
		res.Faults[k] = v
	}
	r.mu.Unlock()
	late, pending, conflict := r.answers.counts()
	res.Faults[FaultProviderLate], res.Faults[FaultProviderPending], res.Faults[FaultProviderConflict] = late, pending, conflict
	return res, nil
}

// store connects as the runtime user and opens the event stream.
func (r *run) store() (*events.JetStore, *nats.Conn, error) {
	nc, err := nats.Connect(strings.Join(r.urls, ","), nats.UserInfo(gateway.RuntimeUser, r.pw), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return events.NewJetStore(js, events.StreamName), nc, nil
}

// heal resumes paused daemons and starts every process that is down.
func (r *run) heal(ctx context.Context) error {
	for _, n := range r.nats {
		if !n.Running() {
			if err := n.Start(); err != nil {
				return err
			}
		}
	}
	for _, d := range r.daemons {
		if d.Paused() {
			_ = d.Signal(syscall.SIGCONT)
		}
		if !d.Running() {
			if err := r.startDaemon(ctx, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// injectFaults injects one fault at a time, about every FaultEvery, until
// ctx ends; every process it takes down is back up when it returns.
func (r *run) injectFaults(ctx context.Context) {
	// Every kind in turn, in a new random order each round, so that even a
	// short run injects each kind.
	kinds := []string{FaultKillRandom, FaultKillDispatchStart, FaultKillProviderCall, FaultPause, FaultNATSRestart}
	var cycle []string
	for {
		wait := time.Duration(float64(r.o.FaultEvery) * (0.5 + r.rng.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if len(cycle) == 0 {
			cycle = append(cycle, kinds...)
			r.rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		kind := cycle[0]
		cycle = cycle[1:]
		var healthy []*Proc
		for _, d := range r.daemons {
			r.mu.Lock()
			armed := r.armed[d]
			r.mu.Unlock()
			if d.Running() && !d.Paused() && !armed {
				healthy = append(healthy, d)
			}
		}
		if len(healthy) < 2 && kind != FaultNATSRestart {
			continue // keep one daemon serving
		}
		switch kind {
		case FaultKillRandom:
			d := healthy[r.rng.IntN(len(healthy))]
			d.Kill()
			r.fault(kind)
			r.logf("fault: %s (%s)", kind, d.Name)
			r.later(ctx, time.Duration(300+r.rng.IntN(1200))*time.Millisecond, func() { _ = r.startDaemon(ctx, d) })
		case FaultKillDispatchStart, FaultKillProviderCall:
			d := healthy[r.rng.IntN(len(healthy))]
			point := "after-dispatch-start"
			if kind == FaultKillProviderCall {
				point = "after-provider-call"
			}
			_ = d.Signal(syscall.SIGTERM)
			select {
			case <-d.Done():
			case <-time.After(10 * time.Second):
				d.Kill()
			}
			if err := r.startDaemon(ctx, d, "CONTEXTOSD_FAULT="+point); err != nil {
				r.logf("restart %s armed with %s: %v", d.Name, point, err)
				r.later(ctx, 0, func() { _ = r.startDaemon(context.Background(), d) })
				continue
			}
			r.logf("armed %s with CONTEXTOSD_FAULT=%s", d.Name, point)
			r.mu.Lock()
			r.armed[d] = true
			r.mu.Unlock()
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				defer func() {
					r.mu.Lock()
					delete(r.armed, d)
					r.mu.Unlock()
				}()
				select {
				case <-d.Done():
					if d.Exit() == "killed" {
						r.fault(kind)
						r.logf("fault: %s (%s)", kind, d.Name)
					}
				case <-ctx.Done():
					d.Kill() // never reached the point: disarm
				}
				_ = r.startDaemon(context.Background(), d)
			}()
		case FaultPause:
			d := healthy[r.rng.IntN(len(healthy))]
			if d.Signal(syscall.SIGSTOP) != nil {
				continue
			}
			r.fault(kind)
			pause := time.Duration(500+r.rng.IntN(2500)) * time.Millisecond
			r.logf("fault: %s (%s, %s)", kind, d.Name, pause)
			r.later(ctx, pause, func() { _ = d.Signal(syscall.SIGCONT) })
		case FaultNATSRestart:
			n := r.nats[r.rng.IntN(len(r.nats))]
			for _, m := range r.nats {
				if !m.Running() {
					n = nil // one node down at a time: a cluster keeps its quorum
				}
			}
			if n == nil {
				continue
			}
			n.Kill()
			r.fault(kind)
			r.logf("fault: %s (%s)", kind, n.Name)
			r.later(ctx, time.Duration(300+r.rng.IntN(1200))*time.Millisecond, func() {
				if err := n.Start(); err != nil {
					r.logf("restart %s: %v", n.Name, err)
				}
			})
		}
	}
}

// later runs fn after d in the background (also when ctx ends: every
// process taken down is brought back).
func (r *run) later(ctx context.Context, d time.Duration, fn func()) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		fn()
	}()
}

// answerCounter counts the provider's answers to refund calls that a
// client would see as faults: late (after the client's timeout), pending
// (202) and 409.
type answerCounter struct {
	h    http.Handler
	late time.Duration
	mu   sync.Mutex
	n    [3]int
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

func (a *answerCounter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/refunds" {
		a.h.ServeHTTP(w, req)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: 200}
	a.h.ServeHTTP(sw, req)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case time.Since(start) >= a.late:
		a.n[0]++
	case sw.status == http.StatusAccepted:
		a.n[1]++
	case sw.status == http.StatusConflict:
		a.n[2]++
	}
}

func (a *answerCounter) counts() (late, pending, conflict int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[0], a.n[1], a.n[2]
}

// Table prints the run's table.
func (r *Result) Table(w io.Writer) {
	o := r.Options
	topo := "1 nats-server process, R1"
	if o.Mode == ModeCluster {
		topo = "3-node nats-server cluster, R3"
	}
	if o.Ownership {
		topo += ", replicas owning the tenant's partition"
	}
	fmt.Fprintf(w, "\nchaos run: mode %s (%s, %d contextosd), load %s, seed %d, %d agents x %d connections, %d orders, total %s\n",
		o.Mode, topo, o.Daemons, o.Duration, o.Seed, o.Agents, o.Workers, o.Resources, r.Elapsed.Round(time.Second))
	row := func(name string, v any, verdict string) { fmt.Fprintf(w, "  %-48s %-28v %s\n", name, v, verdict) }
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "VIOLATION"
	}
	fmt.Fprintf(w, "  %-48s %-28s %s\n", "check", "value", "verdict")
	row("operations: proposals (incl. resends)", r.Operations[lincheck.KindReserve], "")
	row("operations: exposure reads", r.Operations[lincheck.KindRead], "")
	row("operations: reconcile / close / assert-absence", fmt.Sprintf("%d / %d / %d", r.Operations[lincheck.KindReconcile], r.Operations[lincheck.KindClose], r.Operations[lincheck.KindAssert]), "")
	var kinds []string
	for k := range r.Replies {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		row("  replies "+k, r.Replies[k], "")
	}
	for _, k := range []string{FaultKillRandom, FaultKillDispatchStart, FaultKillProviderCall, FaultPause, FaultNATSRestart, FaultProviderLate, FaultProviderPending, FaultProviderConflict} {
		row("faults: "+k, r.Faults[k], "")
	}
	row("ceiling violations (replies, reads, stream)", len(r.CeilingViolations), ok(len(r.CeilingViolations) == 0))
	row("  balances checked in replies and reads", r.BalancesChecked, "")
	row("acknowledged events lost", fmt.Sprintf("%d of %d acks", len(r.Acct.AcksLost), r.Acct.Acks), ok(len(r.Acct.AcksLost) == 0))
	lin := "linearizable"
	if !r.Lin.OK {
		lin = r.Lin.String()
	}
	row("linearizability (porcupine, per order)", lin, ok(r.Lin.OK))
	row("  operations / pending / orders", fmt.Sprintf("%d / %d / %d", r.Lin.Operations, r.Lin.Pending, r.Lin.Partitions), "")
	row("provider calls / keys / applied / replays", fmt.Sprintf("%d / %d / %d / %d", r.Acct.ProviderCalls, r.Acct.ProviderKeys, r.Acct.ProviderApplied, r.Acct.Replays), "")
	row("committed receipts", r.Acct.Committed, ok(r.Acct.Committed == r.Acct.ProviderApplied))
	row("effects without a committed receipt", len(r.Acct.EffectWithoutReceipt), ok(len(r.Acct.EffectWithoutReceipt) == 0))
	row("committed receipts without an effect", len(r.Acct.ReceiptWithoutEffect), ok(len(r.Acct.ReceiptWithoutEffect) == 0))
	row("orders refunded above the ceiling (provider)", len(r.Acct.OverCeiling), ok(len(r.Acct.OverCeiling) == 0))
	row("orders: provider-applied sum != committed", len(r.Acct.Mismatch), ok(len(r.Acct.Mismatch) == 0))
	row("stranded exposure before reconciliation", fmt.Sprintf("%d attempts, %d", r.StrandedBefore[0], r.StrandedBefore[1]), "")
	row("stranded exposure after reconciliation", fmt.Sprintf("%d attempts, %d", r.StrandedAfter[0], r.StrandedAfter[1]), ok(r.StrandedAfter[0] == 0))
	row("  reconciliation rounds", r.FinalizeRounds, ok(r.FinalizeErr == nil))
	row("stream events / bad signatures / fold errors", fmt.Sprintf("%d / %d / %d", r.StreamEvents, len(r.BadSignatures), len(r.FoldErrors)), ok(len(r.BadSignatures)+len(r.FoldErrors) == 0))
	row("incidents (contradicting observations)", r.Incidents, "")
	row("audit log: records / checkpoints, verified", fmt.Sprintf("%d / %d", r.AuditLog.Records, r.AuditLog.Checkpoints), ok(r.AuditLog.Err == nil))
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "  verdict: %s   (work dir %s)\n", verdict, r.Dir)
	for _, l := range [][]string{r.CeilingViolations, r.Acct.Violations(), r.BadSignatures, r.FoldErrors} {
		for i, s := range l {
			if i == 20 {
				fmt.Fprintf(w, "    ... %d more\n", len(l)-20)
				break
			}
			fmt.Fprintf(w, "    %s\n", s)
		}
	}
	if r.FinalizeErr != nil {
		fmt.Fprintf(w, "    reconciliation: %v\n", r.FinalizeErr)
	}
	if r.AuditLog.Err != nil {
		fmt.Fprintf(w, "    audit log: %v\n", r.AuditLog.Err)
	}
}
