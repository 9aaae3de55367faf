package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/contextos/ledger/internal/testing/lincheck"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Capability is the refund capability every proposal of the driver uses.
const Capability = refundcfg.Capability

// Driver talks to the gateway as agents and an operator over NATS and
// records every call in a lincheck history: invocation and return time,
// outcome, or unknown when no reply came in time.
type Driver struct {
	URL         string
	Tenant      string
	GuaranteeID string
	Limit       int64
	H           *lincheck.History

	clients atomic.Int64
	mu      sync.Mutex
	props   map[string]*Proposal // by model key (run/operation key)
	byAtt   map[string]string    // attempt id -> model key
	acked   []Ack
	counts  map[string]int // reply kinds
}

// Proposal is one proposal the driver sent (resends share it).
type Proposal struct {
	Principal, RunID, OperationKey string
	Resource                       string
	Amount                         int64
	AttemptID                      string
	OperationID                    string
}

// Key is the proposal's identity in the model.
func (p *Proposal) Key() string { return p.RunID + "/" + p.OperationKey }

// Ack is an acknowledgement a client saw: the reply named an operation
// (and an attempt) with a status. Each must be backed by stored events.
type Ack struct {
	OperationID string
	AttemptID   string
	Status      string
	Code        string
}

// NewDriver returns a driver for one tenant and one guarantee.
func NewDriver(url, tenant, guaranteeID string, limit int64) *Driver {
	return &Driver{URL: url, Tenant: tenant, GuaranteeID: guaranteeID, Limit: limit, H: lincheck.NewHistory(),
		props: map[string]*Proposal{}, byAtt: map[string]string{}, counts: map[string]int{}}
}

func (d *Driver) count(kind string) {
	d.mu.Lock()
	d.counts[kind]++
	d.mu.Unlock()
}

// Counts returns how many replies of each kind ("applied", "refused:<code>",
// "timeout", ...) the clients saw.
func (d *Driver) Counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.counts))
	for k, v := range d.counts {
		out[k] = v
	}
	return out
}

// Acks returns every acknowledgement seen.
func (d *Driver) Acks() []Ack {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Ack(nil), d.acked...)
}

// Client is one NATS connection of a principal, with its own inbox prefix.
type Client struct {
	d         *Driver
	id        int
	principal string
	nc        *nats.Conn
}

// Connect connects as a principal of the driver's tenant.
func (d *Driver) Connect(principal, password string) (*Client, error) {
	nc, err := nats.Connect(d.URL, nats.UserInfo(wire.UserName(d.Tenant, principal), password),
		nats.CustomInboxPrefix(wire.InboxPrefix(d.Tenant, principal)), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", principal, err)
	}
	return &Client{d: d, id: int(d.clients.Add(1)) - 1, principal: principal, nc: nc}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// NewProposal registers a proposal (not yet sent).
func (c *Client) NewProposal(runID, key, resource string, amount int64) *Proposal {
	p := &Proposal{Principal: c.principal, RunID: runID, OperationKey: key, Resource: resource, Amount: amount}
	c.d.mu.Lock()
	c.d.props[p.Key()] = p
	c.d.mu.Unlock()
	return p
}

// Propose sends p (again) and records it: a reservation and, unless
// refused, a settlement, both over the call's window.
func (c *Client) Propose(p *Proposal, timeout time.Duration) (wire.Reply, error) {
	body, _ := json.Marshal(map[string]any{"run_id": p.RunID, "operation_key": p.OperationKey, "capability_id": Capability,
		"arguments": map[string]any{"order_id": p.Resource, "amount_minor": p.Amount, "currency": "INR"}})
	in := lincheck.Input{Resource: p.Resource, Limit: c.d.Limit, Key: p.Key(), Amount: p.Amount}
	call := c.d.H.Now()
	msg, err := c.nc.Request(wire.ProposeSubject(c.d.Tenant, c.principal), body, timeout)
	var r wire.Reply
	if errors.Is(err, nats.ErrNoResponders) {
		// The server delivered the request to nobody: nothing happened.
		c.d.count("no responders")
		return r, err
	}
	if err == nil {
		err = json.Unmarshal(msg.Data, &r)
	}
	if err != nil || (r.Status == lincheck.StatusUnknown && r.OperationID == "") {
		// No reply, or the ledger could not be reached: anything may
		// have happened.
		c.d.count("timeout")
		c.record(call, in, lincheck.Output{Unknown: true}, true)
		if err == nil {
			err = fmt.Errorf("unknown: %s", r.Reason)
		}
		return r, err
	}
	out := lincheck.ProposalOutput(r)
	kind := string(r.Status)
	if r.Code != "" {
		kind += ":" + string(r.Code)
	}
	c.d.count(kind)
	c.d.mu.Lock()
	if r.AttemptID != "" {
		p.AttemptID = r.AttemptID
		c.d.byAtt[r.AttemptID] = p.Key()
	}
	if r.OperationID != "" {
		p.OperationID = r.OperationID
		c.d.acked = append(c.d.acked, Ack{OperationID: r.OperationID, AttemptID: r.AttemptID, Status: string(r.Status), Code: string(r.Code)})
	}
	c.d.mu.Unlock()
	c.record(call, in, out, r.Status != lincheck.StatusRefused)
	return r, nil
}

func (c *Client) record(call int64, in lincheck.Input, out lincheck.Output, settle bool) {
	in.Kind = lincheck.KindReserve
	res := out
	if out.Status != lincheck.StatusRefused {
		res.HasBalance = false // the reservation's own balances are not reported
	}
	c.d.H.Add(c.id, call, in, res)
	if settle {
		in.Kind = lincheck.KindSettle
		c.d.H.Add(c.id, call, in, out)
	}
}

// op sends an operator verb.
func (c *Client) op(verb string, req wire.OpRequest, timeout time.Duration) (wire.OpReply, error) {
	b, _ := json.Marshal(req)
	msg, err := c.nc.Request(wire.OpSubject(c.d.Tenant, verb, c.principal), b, timeout)
	var r wire.OpReply
	if err == nil {
		err = json.Unmarshal(msg.Data, &r)
	}
	return r, err
}

// Read reads a resource's balances (operator verb exposure) and records it.
func (c *Client) Read(resource string, timeout time.Duration) (lincheck.Output, error) {
	in := lincheck.Input{Kind: lincheck.KindRead, Resource: resource, Limit: c.d.Limit}
	call := c.d.H.Now()
	r, err := c.op("exposure", wire.OpRequest{GuaranteeID: c.d.GuaranteeID, Resource: resource}, timeout)
	if err != nil || !r.OK {
		c.d.count("read-failed")
		if err == nil {
			err = fmt.Errorf("exposure: %s %s", r.Code, r.Reason)
		}
		return lincheck.Output{Unknown: true}, err // a failed read constrains nothing
	}
	out := lincheck.Output{HasBalance: true, Limit: c.d.Limit}
	for _, row := range r.Exposure {
		if row.Resource == resource && row.GuaranteeID == c.d.GuaranteeID {
			out.Limit, out.Committed, out.Held = row.Limit, row.Committed, row.Held
		}
	}
	c.d.H.Add(c.id, call, in, out)
	return out, nil
}

// Attempts lists the open attempts (not recorded: it reads no balance).
func (c *Client) Attempts(timeout time.Duration) ([]wire.AttemptRow, error) {
	r, err := c.op("attempts", wire.OpRequest{}, timeout)
	if err == nil && !r.OK {
		err = fmt.Errorf("attempts: %s %s", r.Code, r.Reason)
	}
	return r.Attempts, err
}

// attemptInput is the model input of an operator action on an attempt.
// Attempts the driver never saw acknowledged are named by a placeholder
// that Operations resolves from the stream.
func (c *Client) attemptInput(kind lincheck.Kind, attemptID string) lincheck.Input {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	in := lincheck.Input{Kind: kind, Limit: c.d.Limit, Key: "attempt:" + attemptID, Resource: "attempt:" + attemptID}
	if k, ok := c.d.byAtt[attemptID]; ok {
		in.Key, in.Resource = k, c.d.props[k].Resource
	}
	return in
}

// Reconcile reconciles one attempt (or all with attemptID "") and records
// one operation per settled row.
func (c *Client) Reconcile(attemptID string, timeout time.Duration) ([]wire.SettleRow, error) {
	call := c.d.H.Now()
	req := wire.OpRequest{AttemptID: attemptID, All: attemptID == ""}
	r, err := c.op("reconcile", req, timeout)
	if err != nil {
		if attemptID != "" {
			c.d.H.Add(c.id, call, c.attemptInput(lincheck.KindReconcile, attemptID), lincheck.Output{Unknown: true})
		}
		// A lost reconcile-all may have settled attempts nobody names:
		// the settled attempts' own pending operations cover that only
		// if they are pending; the caller reconciles again, which
		// reports them as already resolved.
		return nil, err
	}
	for _, row := range r.Settled {
		out := lincheck.Output{OK: row.Code == "", Status: string(row.Status), Code: string(row.Code), Outcome: string(row.Outcome)}
		c.d.H.Add(c.id, call, c.attemptInput(lincheck.KindReconcile, row.AttemptID), out)
	}
	return r.Settled, nil
}

// CloseAttempt closes an unstarted attempt and records it.
func (c *Client) CloseAttempt(attemptID string, timeout time.Duration) (wire.OpReply, error) {
	return c.attemptOp(lincheck.KindClose, "close-attempt", wire.OpRequest{AttemptID: attemptID}, timeout)
}

// Assert asserts an attempt's absence with an artifact and records it.
func (c *Client) Assert(attemptID, artifact string, timeout time.Duration) (wire.OpReply, error) {
	return c.attemptOp(lincheck.KindAssert, "assert-absence", wire.OpRequest{AttemptID: attemptID, ArtifactRef: artifact}, timeout)
}

func (c *Client) attemptOp(kind lincheck.Kind, verb string, req wire.OpRequest, timeout time.Duration) (wire.OpReply, error) {
	call := c.d.H.Now()
	r, err := c.op(verb, req, timeout)
	out := lincheck.Output{Unknown: err != nil, OK: r.OK, Code: string(r.Code)}
	c.d.H.Add(c.id, call, c.attemptInput(kind, req.AttemptID), out)
	return r, err
}

// Operations returns the history with every placeholder attempt resolved
// through attempts (attempt id -> model key and resource, from the stream).
func (d *Driver) Operations(attempts map[string]*lincheck.Attempt) []porcupine.Operation {
	ops := d.H.Operations()
	for i, op := range ops {
		in := op.Input.(lincheck.Input)
		if !strings.HasPrefix(in.Key, "attempt:") {
			continue
		}
		if a, ok := attempts[strings.TrimPrefix(in.Key, "attempt:")]; ok && a.RunID != "" {
			in.Key, in.Resource = a.RunID+"/"+a.OperationKey, a.Resource
			ops[i].Input = in
		}
	}
	return ops
}

// Load is a bounded random workload.
type Load struct {
	Agents      map[string]string // principal -> password
	Resources   []string
	Amounts     []int64
	PerAgent    int           // proposals per agent worker
	Workers     int           // workers per agent
	Timeout     time.Duration // the usual client timeout
	Short       time.Duration // a short client timeout, to leave calls unknown
	ShortRate   float64       // share of calls with the short timeout
	ResendRate  float64       // share of calls that resend an earlier proposal
	Reads       int           // exposure reads per operator worker
	ReadWorkers int
	Operator    [2]string // principal, password
	Seed        uint64
}

// Run drives the load to completion (or until ctx ends).
func (d *Driver) Run(ctx context.Context, l Load) error {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	principals := make([]string, 0, len(l.Agents))
	for p := range l.Agents {
		principals = append(principals, p)
	}
	sort.Strings(principals)
	for ai, principal := range principals {
		for w := 0; w < l.Workers; w++ {
			c, err := d.Connect(principal, l.Agents[principal])
			if err != nil {
				return err
			}
			wg.Add(1)
			go func(ai, w int, c *Client) {
				defer wg.Done()
				defer c.Close()
				rng := rand.New(rand.NewPCG(l.Seed, uint64(ai*1000+w)))
				var sent []*Proposal
				for i := 0; i < l.PerAgent && ctx.Err() == nil; i++ {
					var p *Proposal
					if len(sent) > 0 && rng.Float64() < l.ResendRate {
						p = sent[rng.IntN(len(sent))]
					} else {
						run := fmt.Sprintf("run-%s-%d", c.principal, w)
						p = c.NewProposal(run, fmt.Sprintf("op-%d", i), l.Resources[rng.IntN(len(l.Resources))], l.Amounts[rng.IntN(len(l.Amounts))])
						sent = append(sent, p)
					}
					to := l.Timeout
					if rng.Float64() < l.ShortRate {
						to = l.Short
					}
					if _, err := c.Propose(p, to); err != nil {
						time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond) // NATS or a daemon is down
					}
				}
			}(ai, w, c)
		}
	}
	for w := 0; w < l.ReadWorkers; w++ {
		c, err := d.Connect(l.Operator[0], l.Operator[1])
		if err != nil {
			return err
		}
		wg.Add(1)
		go func(w int, c *Client) {
			defer wg.Done()
			defer c.Close()
			rng := rand.New(rand.NewPCG(l.Seed, uint64(900000+w)))
			for i := 0; i < l.Reads && ctx.Err() == nil; i++ {
				if _, err := c.Read(l.Resources[rng.IntN(len(l.Resources))], l.Timeout); err != nil {
					time.Sleep(200 * time.Millisecond)
				}
				time.Sleep(time.Duration(20+rng.IntN(50)) * time.Millisecond)
			}
		}(w, c)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Finalize reconciles until no attempt is open or the deadline passes: it
// settles the provider's pending refunds (alternately succeeded and
// failed), reconciles started and held attempts, closes unstarted ones and,
// where reconciliation cannot tell and the provider's own records (the
// artifact) show no refund for the attempt's key, asserts absence. quiet
// is how long a never-answered call must have been over before its absence
// may be asserted. It returns the rounds it took.
func (d *Driver) Finalize(ctx context.Context, op *Client, prov *provider.Server, quiet time.Duration, deadline time.Time) (int, error) {
	flip := false
	since := map[string]time.Time{}
	for round := 1; ; round++ {
		rows, err := op.Attempts(10 * time.Second)
		if err != nil {
			if time.Now().After(deadline) {
				return round, err
			}
			time.Sleep(300 * time.Millisecond)
			continue
		}
		if len(rows) == 0 {
			return round, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return round, fmt.Errorf("%d attempts still open after %d rounds", len(rows), round)
		}
		refunds := map[string]provider.Refund{}
		for _, rf := range prov.Refunds() {
			refunds[rf.Key] = rf
			if rf.Status == "pending" {
				st := "succeeded"
				if flip {
					st = "failed"
				}
				flip = !flip
				prov.Settle(rf.Key, st)
			}
		}
		for _, row := range rows {
			switch row.State {
			case "reserved":
				_, _ = op.CloseAttempt(row.AttemptID, 10*time.Second)
			default:
				settled, err := op.Reconcile(row.AttemptID, 10*time.Second)
				if err != nil || len(settled) != 1 {
					continue
				}
				s := settled[0]
				if kernel.Outcome(s.Outcome).Definitive() || s.Code != "" {
					continue
				}
				if _, seen := refunds[row.AttemptID]; seen {
					continue
				}
				if since[row.AttemptID].IsZero() {
					since[row.AttemptID] = time.Now()
				}
				if time.Since(since[row.AttemptID]) >= quiet {
					_, _ = op.Assert(row.AttemptID, "provider-refunds-export:no-refund-for-"+row.AttemptID, 10*time.Second)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}
