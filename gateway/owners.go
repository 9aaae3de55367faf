package gateway

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
)

// Replica ownership (docs/replicas.md): each tenant's requests are served
// by the replica that owns the tenant's partition, so two replicas do not
// keep warm state of the same subjects and refuse each other's appends.
// It is transport only: the rules (which partition, how many a replica may
// own) are kernel.Partition and kernel.PlanOwnership, and a request is
// admitted and decided once, by the replica that handles it. Ownership is
// never what keeps the ledger right: every append still carries its
// expected last subject sequence.

const (
	// OwnersBucket is the JetStream KV bucket of the replicas' membership
	// keys (m.<replica>) and partition keys (p.<n>, the owner's id).
	OwnersBucket = "CTX_OWNERS"
	// OwnerSubjectPrefix is followed by a replica's id: the subject that
	// replica receives forwarded requests on. Only the runtime's own user
	// may publish or subscribe under ctx.internal.
	OwnerSubjectPrefix = "ctx.internal.owner."
	ownersKV           = "$KV." + OwnersBucket + ".>"
	// forwardedHeader carries a forwarded request's own subject, whose
	// tokens are the requester's identity.
	forwardedHeader = "Ctx-Forwarded-Subject"
	// forwardedReplyHeader carries a forwarded request's own reply subject:
	// the forward's reply subject is the owner's receipt, so the sender
	// learns at once that the owner is gone (no responders) instead of a
	// TTL later.
	forwardedReplyHeader = "Ctx-Forwarded-Reply"
	// maxForwarding bounds the forwards waiting for a receipt; past it a
	// request is handled here, so a flood cannot grow the goroutines.
	maxForwarding = 4096
)

// OwnershipPublish and OwnershipSubscribe are what the runtime's own user
// needs besides RuntimePublish and RuntimeSubscribe when nats.ownership is
// enabled.
var (
	OwnershipPublish   = []string{ownersKV, "ctx.internal.>"}
	OwnershipSubscribe = []string{"ctx.internal.>"}
)

// OwnershipStats are one replica's ownership counters.
type OwnershipStats struct {
	ID        string            // this replica's member id
	Owned     []int             // partitions owned now
	Known     int               // partitions with a current owner, here or elsewhere, as this replica sees them
	Forwarded uint64            // requests sent on to their owner
	Received  uint64            // requests forwarded here by another replica
	Fallbacks uint64            // requests sent on whose owner did not take them, handled here instead
	Handled   map[string]uint64 // requests handled here, by tenant (forwarded here or not)
}

type ownerRoute struct {
	filter, tenant string
	cb             nats.MsgHandler
}

type ownerEntry struct {
	value string
	rev   uint64
	seen  time.Time // local time of the last write seen: freshness never compares clocks of two machines
}

type owners struct {
	g    *Gateway
	cfg  config.OwnershipConfig
	id   string
	conn *nats.Conn // receives and forwards
	kv   jetstream.KeyValue

	mu      sync.Mutex
	view    map[string]ownerEntry
	mine    map[int]time.Time // partitions owned: when last written
	routes  []ownerRoute
	handled map[string]*atomic.Uint64

	forwarded, received, fallbacks atomic.Uint64
	forwarding                     chan struct{} // a slot per forward waiting for its receipt
	cancel                         context.CancelFunc
	done                           chan struct{}
}

func newOwners(g *Gateway) *owners {
	o := g.cfg.NATS.Ownership
	if !o.Enabled {
		return nil
	}
	return &owners{g: g, cfg: o.WithDefaults(), id: strings.ToLower(nuid.Next()), view: map[string]ownerEntry{}, mine: map[int]time.Time{}, handled: map[string]*atomic.Uint64{},
		forwarding: make(chan struct{}, maxForwarding)}
}

// ownersInitialWait bounds a start's wait for the bucket's current values.
const ownersInitialWait = 10 * time.Second

func partitionKey(p int) string  { return "p." + strconv.Itoa(p) }
func memberKey(id string) string { return "m." + id }

// route wraps a subscription's callback: a request of a partition another
// live replica owns is sent on to it as it is (reply subject, headers and
// body); otherwise, owned here or with no owner known, it is handled here.
// A request sent on that its owner does not take (gone, or no receipt
// within a heartbeat) is handled here too: the owner may then handle it as
// well, which costs the requester a second reply to the same operation key
// and the ledger nothing (expected sequences, one operation per key).
func (o *owners) route(tenant, filter string, cb nats.MsgHandler) nats.MsgHandler {
	if o == nil {
		return cb
	}
	o.mu.Lock()
	o.routes = append(o.routes, ownerRoute{filter: filter, tenant: tenant, cb: cb})
	c, ok := o.handled[tenant]
	if !ok {
		c = new(atomic.Uint64)
		o.handled[tenant] = c
	}
	o.mu.Unlock()
	p := kernel.Partition(tenant, o.cfg.Partitions)
	here := func(m *nats.Msg) {
		c.Add(1)
		cb(m)
	}
	return func(m *nats.Msg) {
		owner := o.ownerElsewhere(p)
		if owner == "" {
			here(m)
			return
		}
		select {
		case o.forwarding <- struct{}{}:
		default:
			here(m)
			return
		}
		o.forwarded.Add(1)
		go func() {
			defer func() { <-o.forwarding }()
			if err := o.forward(owner, m); err != nil {
				o.fallbacks.Add(1)
				o.g.log.Debug("forwarded request not taken by its owner; handled here", "owner", owner, "err", err)
				here(m)
			}
		}()
	}
}

// Serves reports whether this replica serves tenant now: always with
// ownership off, else when it owns the tenant's partition or no other
// replica's claim on it is current. What only saves work (the audit
// projector's appends) runs where it serves.
func (g *Gateway) Serves(tenant string) bool {
	return g.own == nil || g.own.ownerElsewhere(kernel.Partition(tenant, g.own.cfg.Partitions)) == ""
}

// ownerElsewhere is p's owner when it is another replica whose claim is
// current, else "".
func (o *owners) ownerElsewhere(p int) string {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if at, ok := o.mine[p]; ok && now.Sub(at) < o.cfg.TTL.Duration {
		return ""
	}
	e, ok := o.view[partitionKey(p)]
	if !ok || e.value == "" || e.value == o.id || now.Sub(e.seen) >= o.cfg.TTL.Duration {
		return ""
	}
	return e.value
}

// forward sends m to owner and waits for its receipt: an error means the
// owner did not take it.
func (o *owners) forward(owner string, m *nats.Msg) error {
	f := nats.NewMsg(OwnerSubjectPrefix + owner)
	f.Data = m.Data
	for k, v := range m.Header {
		f.Header[k] = v
	}
	f.Header.Set(forwardedHeader, m.Subject)
	f.Header.Set(forwardedReplyHeader, m.Reply)
	_, err := o.conn.RequestMsg(f, o.cfg.Heartbeat.Duration)
	return err
}

// receive handles a request another replica forwarded here: always here,
// never sent on again, through the callback its own subject has.
func (o *owners) receive(m *nats.Msg) {
	subject := m.Header.Get(forwardedHeader)
	o.mu.Lock()
	var r *ownerRoute
	for i := range o.routes {
		if server.SubjectMatchesFilter(subject, o.routes[i].filter) {
			r = &o.routes[i]
			break
		}
	}
	var c *atomic.Uint64
	if r != nil {
		c = o.handled[r.tenant]
	}
	o.mu.Unlock()
	if r == nil {
		o.g.log.Warn("forwarded request on no subject this replica serves dropped", "subject", subject)
		return
	}
	o.received.Add(1)
	c.Add(1)
	reply := m.Reply
	if _, ok := m.Header[forwardedReplyHeader]; ok {
		reply = m.Header.Get(forwardedReplyHeader)
		// The receipt: the sender stops waiting; the reply goes to the
		// requester.
		_ = m.Respond(nil)
	}
	h := nats.Header{}
	for k, v := range m.Header {
		if k != forwardedHeader && k != forwardedReplyHeader {
			h[k] = v
		}
	}
	r.cb(&nats.Msg{Subject: subject, Reply: reply, Header: h, Data: m.Data, Sub: m.Sub})
}

// start opens the bucket, the forwarded requests' subscription and the
// heartbeat. nc is the runtime's own connection.
func (o *owners) start(ctx context.Context, nc *nats.Conn) error {
	if o == nil {
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if o.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: OwnersBucket, History: 1, TTL: o.cfg.TTL.Duration,
		Storage: jetstream.MemoryStorage, Replicas: o.g.cfg.NATS.Replicas,
		Description: "contextosd replicas' ownership of tenant partitions (docs/replicas.md)"}); err != nil {
		return fmt.Errorf("ownership bucket: %w", err)
	}
	if o.conn, err = o.g.connect(nc, "contextosd-owner"); err != nil {
		return err
	}
	sub, err := o.conn.Subscribe(OwnerSubjectPrefix+o.id, o.receive)
	if err != nil {
		return err
	}
	if err := sub.SetPendingLimits(-1, 256<<20); err != nil {
		return err
	}
	o.g.subs = append(o.g.subs, sub)
	if err := o.conn.Flush(); err != nil {
		return err
	}
	w, err := o.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("ownership bucket: watch: %w", err)
	}
	// The first heartbeat plans on the bucket as it is, not on an empty view.
	// A bucket whose values do not come (its stream electing a leader) fails
	// the start instead of hanging it: a supervisor starts the replica again.
	initial := time.NewTimer(ownersInitialWait)
	defer initial.Stop()
	for loaded := false; !loaded; {
		select {
		case e := <-w.Updates():
			if e == nil {
				loaded = true
				continue
			}
			o.see(e.Key(), string(e.Value()), e.Revision(), e.Operation() != jetstream.KeyValuePut)
		case <-initial.C:
			_ = w.Stop()
			return fmt.Errorf("ownership bucket: its values did not arrive within %s", ownersInitialWait)
		}
	}
	ctx, o.cancel = context.WithCancel(ctx)
	o.done = make(chan struct{})
	go o.watch(ctx, w)
	go o.beat(ctx)
	o.g.log.Info("ownership on", "replica", o.id, "partitions", o.cfg.Partitions, "ttl", o.cfg.TTL.Duration, "heartbeat", o.cfg.Heartbeat.Duration)
	return nil
}

// watch keeps the view of the bucket.
func (o *owners) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				o.see(e.Key(), string(e.Value()), e.Revision(), e.Operation() != jetstream.KeyValuePut)
			}
		}
	}
}

// see records a write of key; an older revision than the one known (our
// own write, recorded from its acknowledgement, may arrive later) is not.
func (o *owners) see(key, value string, rev uint64, deleted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.view[key]; ok && e.rev >= rev {
		return
	}
	if deleted {
		value = ""
	}
	o.view[key] = ownerEntry{value: value, rev: rev, seen: time.Now()}
}

func (o *owners) beat(ctx context.Context) {
	defer close(o.done)
	t := time.NewTicker(o.cfg.Heartbeat.Duration)
	defer t.Stop()
	for {
		o.heartbeat(ctx)
		select {
		case <-ctx.Done():
			o.release()
			return
		case <-t.C:
		}
	}
}

// heartbeat renews this replica's membership and partitions and claims or
// releases as kernel.PlanOwnership says.
func (o *owners) heartbeat(ctx context.Context) {
	// A write that lands within the TTL still counts, so a slow store
	// delays a heartbeat rather than failing it; the writes of one
	// heartbeat go at once, not one round trip after another.
	ctx, cancel := context.WithTimeout(ctx, o.cfg.TTL.Duration)
	defer cancel()
	start := time.Now()
	o.mu.Lock()
	var live []string
	for k, e := range o.view {
		if id, ok := strings.CutPrefix(k, "m."); ok && e.value != "" && start.Sub(e.seen) < o.cfg.TTL.Duration {
			live = append(live, id)
		}
	}
	table := make([]string, o.cfg.Partitions)
	revs := make([]uint64, o.cfg.Partitions)
	for p := range table {
		e := o.view[partitionKey(p)]
		revs[p] = e.rev
		if e.value != "" && start.Sub(e.seen) < o.cfg.TTL.Duration {
			table[p] = e.value
		}
	}
	o.mu.Unlock()
	plan := kernel.PlanOwnership(o.id, live, table)
	var wg sync.WaitGroup
	wg.Go(func() {
		rev, err := o.kv.Put(ctx, memberKey(o.id), []byte(o.id))
		if err != nil {
			o.g.log.Warn("ownership heartbeat failed", "replica", o.id, "err", err)
			return
		}
		o.see(memberKey(o.id), o.id, rev, false)
	})
	// write renews or claims p. Its key expires a TTL after the server
	// stores it, which is after start: owning it until start plus the TTL
	// is safe on this replica's clock.
	write := func(p int, create bool) {
		key := partitionKey(p)
		var rev uint64
		var err error
		if revs[p] != 0 {
			rev, err = o.kv.Update(ctx, key, []byte(o.id), revs[p])
		}
		if (revs[p] == 0 || err != nil) && create {
			// Never written, or expired on the server since it was seen.
			rev, err = o.kv.Create(ctx, key, []byte(o.id))
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if err != nil {
			if _, had := o.mine[p]; had && !create {
				o.g.log.Warn("ownership of a partition lost", "replica", o.id, "partition", p, "err", err)
			}
			delete(o.mine, p)
			return
		}
		o.mine[p] = start
		if e, ok := o.view[key]; !ok || e.rev < rev {
			o.view[key] = ownerEntry{value: o.id, rev: rev, seen: start}
		}
	}
	for _, p := range plan.Keep {
		wg.Go(func() { write(p, false) })
	}
	for _, p := range plan.Claim {
		wg.Go(func() { write(p, true) })
	}
	for _, p := range plan.Release {
		o.mu.Lock()
		delete(o.mine, p)
		o.mu.Unlock()
		wg.Go(func() { _ = o.kv.Delete(ctx, partitionKey(p), jetstream.LastRevision(revs[p])) })
	}
	wg.Wait()
}

// release gives every partition back at a graceful stop, so the others
// claim them at their next heartbeat instead of after the TTL.
func (o *owners) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	o.mu.Lock()
	revs := map[int]uint64{}
	for p := range o.mine {
		revs[p] = o.view[partitionKey(p)].rev
	}
	o.mine = map[int]time.Time{}
	o.mu.Unlock()
	for p, rev := range revs {
		_ = o.kv.Delete(ctx, partitionKey(p), jetstream.LastRevision(rev))
	}
	_ = o.kv.Delete(ctx, memberKey(o.id))
}

// stop ends the heartbeat and releases the partitions.
func (o *owners) stop() {
	if o == nil || o.cancel == nil {
		return
	}
	o.cancel()
	select {
	case <-o.done:
	case <-time.After(3 * time.Second):
	}
}

func (o *owners) stats() OwnershipStats {
	s := OwnershipStats{ID: o.id, Forwarded: o.forwarded.Load(), Received: o.received.Load(), Fallbacks: o.fallbacks.Load(), Handled: map[string]uint64{}}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for p := 0; p < o.cfg.Partitions; p++ {
		if at, ok := o.mine[p]; ok && now.Sub(at) < o.cfg.TTL.Duration {
			s.Owned = append(s.Owned, p)
		}
	}
	for p := 0; p < o.cfg.Partitions; p++ {
		if e, ok := o.view[partitionKey(p)]; ok && e.value != "" && now.Sub(e.seen) < o.cfg.TTL.Duration {
			s.Known++
		}
	}
	for t, c := range o.handled {
		s.Handled[t] = c.Load()
	}
	return s
}

// register adds the ownership series to reg, read at scrape time.
func (o *owners) register(reg *prometheus.Registry) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "contextos_ownership_partitions_owned",
			Help: "Tenant partitions this replica owns now (nats.ownership)."},
			func() float64 { return float64(len(o.stats().Owned)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "contextos_ownership_partitions_known",
			Help: "Tenant partitions with a current owner, this replica or another, as this replica sees them; below nats.ownership.partitions during a hand-over."},
			func() float64 { return float64(o.stats().Known) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "contextos_ownership_forwarded_total",
			Help: "Requests this replica sent on to the replica owning their tenant."},
			func() float64 { return float64(o.forwarded.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "contextos_ownership_received_total",
			Help: "Requests another replica sent on to this one."},
			func() float64 { return float64(o.received.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "contextos_ownership_fallbacks_total",
			Help: "Requests sent on whose owner did not take them (gone, or no receipt within a heartbeat), handled here instead."},
			func() float64 { return float64(o.fallbacks.Load()) }))
}

// Ownership returns this replica's ownership counters; ok is false when
// nats.ownership is off.
func (g *Gateway) Ownership() (OwnershipStats, bool) {
	if g.own == nil {
		return OwnershipStats{}, false
	}
	return g.own.stats(), true
}
