package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// GovernedPeer is the governed operation written by hand on PostgreSQL, the
// way a team that must keep signed evidence would: a service that takes
// the same proposal over the same kind of NATS request as the runtime
// (one connection per agent, request to reply), reserves and starts the
// dispatch in one transaction, calls the same loopback provider, settles
// in a second transaction, and writes an Ed25519-signed audit row with
// each of the two decisions.
//
// What it leaves out, each in PostgreSQL's favour: the audit rows are not
// hash-chained (a chain head row would serialize every transaction of a
// tenant on one lock), there is no kill switch or approval row to read,
// and the NATS server it serves on has no JetStream and no per-agent
// users.
type GovernedPeer struct {
	pg     *Postgres
	srv    *server.Server
	nc     *nats.Conn // the service's connection
	prov   *provider.Server
	http   *httptest.Server
	client *http.Client
	key    ed25519.PrivateKey
	agents []*nats.Conn
}

// governedSubject is the proposal subject of agent a on the peer.
func governedSubject(a int) string { return fmt.Sprintf("pg.v1.%s.agent_%02d.propose", Tenant, a) }

// StartGovernedPeer creates the peer's tables on pg, grants every agent the
// refund capability, starts a plain NATS server on loopback with the
// service subscribed, and connects agents clients.
func StartGovernedPeer(ctx context.Context, pg *Postgres, agents int) (*GovernedPeer, error) {
	if _, err := pg.Pool.Exec(ctx, `
CREATE TABLE IF NOT EXISTS grants (
  tenant text, principal text, capability text,
  PRIMARY KEY (tenant, principal, capability)
);
CREATE TABLE IF NOT EXISTS runs (
  tenant text, run_id text,
  operations bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, run_id)
);
CREATE TABLE IF NOT EXISTS operations (
  tenant        text,
  run_id        text,
  operation_key text,
  operation_id  text NOT NULL UNIQUE,
  principal     text NOT NULL,
  capability    text NOT NULL,
  action_digest text NOT NULL,
  status        text NOT NULL,
  attempt_id    text,
  resource_id   text,
  amount        bigint,
  provider_ref  text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, run_id, operation_key)
);
CREATE TABLE IF NOT EXISTS audit (
  id           bigserial PRIMARY KEY,
  tenant       text NOT NULL,
  operation_id text NOT NULL,
  decision     text NOT NULL,
  record       bytea NOT NULL,
  signature    bytea NOT NULL
);`); err != nil {
		return nil, err
	}
	for a := 0; a < agents; a++ {
		if _, err := pg.Pool.Exec(ctx, `INSERT INTO grants VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			Tenant, fmt.Sprintf("agent_%02d", a), Def.CapabilityIDs[0]); err != nil {
			return nil, err
		}
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("the peer's NATS server did not start")
	}
	p := &GovernedPeer{pg: pg, srv: srv, prov: provider.New(), key: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))}
	p.http = httptest.NewServer(p.prov.Handler())
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = gateway.MaxProviderConns, gateway.MaxProviderConns
	p.client = &http.Client{Transport: t, Timeout: 5 * time.Second}
	if p.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		p.Close()
		return nil, err
	}
	if _, err := p.nc.Subscribe("pg.v1.*.*.propose", func(m *nats.Msg) {
		go func() {
			tok := strings.Split(m.Subject, ".")
			b, _ := json.Marshal(p.Propose(context.Background(), tok[2], tok[3], m.Data))
			_ = m.Respond(b)
		}()
	}); err != nil {
		p.Close()
		return nil, err
	}
	if err := p.nc.Flush(); err != nil {
		p.Close()
		return nil, err
	}
	for a := 0; a < agents; a++ {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			p.Close()
			return nil, err
		}
		p.agents = append(p.agents, nc)
	}
	return p, nil
}

// Close disconnects and stops the peer's NATS server and provider (the
// PostgreSQL server is the caller's).
func (p *GovernedPeer) Close() {
	for _, nc := range p.agents {
		nc.Close()
	}
	if p.nc != nil {
		p.nc.Close()
	}
	if p.http != nil {
		p.http.Close()
	}
	p.srv.Shutdown()
}

// Proposals is the same client loop as Gateway.Proposals, against the peer.
func (p *GovernedPeer) Proposals(pick func(w, i int) string) Op {
	return proposals(p.agents, governedSubject, pick)
}

// peerProposal is the part of a proposal the peer reads.
type peerProposal struct {
	RunID        string `json:"run_id"`
	OperationKey string `json:"operation_key"`
	CapabilityID string `json:"capability_id"`
	Arguments    struct {
		OrderID     string `json:"order_id"`
		AmountMinor int64  `json:"amount_minor"`
		Currency    string `json:"currency"`
		Reference   string `json:"reference,omitempty"`
	} `json:"arguments"`
}

// auditRecord is what the peer signs for each decision.
type auditRecord struct {
	Tenant       string `json:"tenant"`
	OperationID  string `json:"operation_id"`
	AttemptID    string `json:"attempt_id"`
	Decision     string `json:"decision"`
	Principal    string `json:"principal"`
	ActionDigest string `json:"action_digest"`
	Resource     string `json:"resource"`
	Amount       int64  `json:"amount"`
	Committed    int64  `json:"committed"`
	Held         int64  `json:"held"`
	At           string `json:"at"`
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func refused(code wire.Code, reason string) wire.Reply {
	return wire.Reply{Status: wire.StatusRefused, Code: code, Reason: reason}
}

// Propose runs one proposal of (tenant, principal) to its settled reply.
func (p *GovernedPeer) Propose(ctx context.Context, tenant, principal string, body []byte) wire.Reply {
	var pr peerProposal
	if err := json.Unmarshal(body, &pr); err != nil || pr.RunID == "" || pr.OperationKey == "" || pr.Arguments.OrderID == "" || pr.Arguments.AmountMinor <= 0 {
		return refused(wire.CodeRequestMalformed, "bad proposal")
	}
	args, _ := json.Marshal(pr.Arguments)
	sum := sha256.Sum256(append([]byte(tenant+"\x00"+principal+"\x00"+pr.RunID+"\x00"+pr.CapabilityID+"\x00"), args...))
	digest := hex.EncodeToString(sum[:])
	opID, attemptID := newID(), newID()
	res, amt := pr.Arguments.OrderID, pr.Arguments.AmountMinor

	reply, err := p.reserve(ctx, tenant, principal, pr, digest, opID, attemptID)
	if err != nil {
		return wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeLedgerUnavailable, Reason: err.Error()}
	}
	if reply.Status != "" {
		return reply
	}
	status, ref, err := p.dispatch(ctx, attemptID, args)
	if err != nil || status != "succeeded" {
		// A real service would record the unknown outcome and reconcile;
		// the bench's provider always answers.
		return wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeLedgerUnavailable, Reason: fmt.Sprint("provider: ", status, err)}
	}
	if err := p.settle(ctx, tenant, principal, pr, digest, opID, attemptID, res, amt, ref); err != nil {
		return wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeLedgerUnavailable, Reason: err.Error()}
	}
	return wire.Reply{Status: wire.StatusApplied, OperationID: opID, AttemptID: attemptID, ActionDigest: digest}
}

// reserve is the first transaction: the operation key's row (inserted, so
// locked; a key seen before returns its operation), the grant, the run's
// row, the resource's row locked and checked, the dispatch-start on the
// operation and the signed audit row of the decision. An empty reply
// means go on to the provider.
func (p *GovernedPeer) reserve(ctx context.Context, tenant, principal string, pr peerProposal, digest, opID, attemptID string) (wire.Reply, error) {
	res, amt := pr.Arguments.OrderID, pr.Arguments.AmountMinor
	tx, err := p.pg.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return wire.Reply{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `INSERT INTO operations (tenant, run_id, operation_key, operation_id, principal, capability, action_digest, status)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'open') ON CONFLICT DO NOTHING`, tenant, pr.RunID, pr.OperationKey, opID, principal, pr.CapabilityID, digest)
	if err != nil {
		return wire.Reply{}, err
	}
	if tag.RowsAffected() == 0 {
		var st, id, prev string
		if err := tx.QueryRow(ctx, `SELECT status, operation_id, action_digest FROM operations WHERE tenant = $1 AND run_id = $2 AND operation_key = $3 FOR UPDATE`,
			tenant, pr.RunID, pr.OperationKey).Scan(&st, &id, &prev); err != nil {
			return wire.Reply{}, err
		}
		if prev != digest {
			return refused(wire.CodeOperationConflict, "operation key reused for another action"), nil
		}
		return wire.Reply{Status: wire.Status(st), OperationID: id, ActionDigest: digest}, nil
	}
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM grants WHERE tenant = $1 AND principal = $2 AND capability = $3`, tenant, principal, pr.CapabilityID).Scan(&one); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return refused(wire.CodeAuthorityDenied, "no grant"), nil
		}
		return wire.Reply{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO runs (tenant, run_id, operations) VALUES ($1, $2, 1)
ON CONFLICT (tenant, run_id) DO UPDATE SET operations = runs.operations + 1`, tenant, pr.RunID); err != nil {
		return wire.Reply{}, err
	}
	var lim, committed, held int64
	var receipts int
	q := `SELECT lim, committed, held, receipts FROM resources WHERE id = $1 FOR UPDATE`
	err = tx.QueryRow(ctx, q, res).Scan(&lim, &committed, &held, &receipts)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err = tx.Exec(ctx, `INSERT INTO resources (id, lim) VALUES ($1, $2) ON CONFLICT DO NOTHING`, res, Def.Limit); err != nil {
			return wire.Reply{}, err
		}
		err = tx.QueryRow(ctx, q, res).Scan(&lim, &committed, &held, &receipts)
	}
	if err != nil {
		return wire.Reply{}, err
	}
	decision, status := "reserved", "dispatching"
	if committed+held+amt > lim || receipts >= 1024 {
		decision, status = "refused", string(wire.StatusRefused)
	} else {
		held += amt
		if _, err := tx.Exec(ctx, `UPDATE resources SET held = $2, receipts = receipts + 1 WHERE id = $1`, res, held); err != nil {
			return wire.Reply{}, err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE operations SET status = $4, attempt_id = $5, resource_id = $6, amount = $7, updated_at = now()
WHERE tenant = $1 AND run_id = $2 AND operation_key = $3`, tenant, pr.RunID, pr.OperationKey, status, attemptID, res, amt); err != nil {
		return wire.Reply{}, err
	}
	if err := p.audit(ctx, tx, auditRecord{Tenant: tenant, OperationID: opID, AttemptID: attemptID, Decision: decision, Principal: principal,
		ActionDigest: digest, Resource: res, Amount: amt, Committed: committed, Held: held}); err != nil {
		return wire.Reply{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return wire.Reply{}, err
	}
	if decision == "refused" {
		return refused(wire.CodeExceeded, "limit reached"), nil
	}
	return wire.Reply{}, nil
}

// dispatch calls the provider once, keyed by the attempt.
func (p *GovernedPeer) dispatch(ctx context.Context, attemptID string, args []byte) (status, ref string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.http.URL+"/refunds", bytes.NewReader(args))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", attemptID)
	resp, err := p.client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var out struct {
		Refund struct{ ID, Status string } `json:"refund"`
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", "", err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", "", err
	}
	return out.Refund.Status, out.Refund.ID, nil
}

// settle is the second transaction: the operation's row locked and checked
// to be the attempt's, the resource's row moved from held to committed, the
// operation applied and the signed audit row of the decision.
func (p *GovernedPeer) settle(ctx context.Context, tenant, principal string, pr peerProposal, digest, opID, attemptID, res string, amt int64, ref string) error {
	tx, err := p.pg.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var st, att string
	if err := tx.QueryRow(ctx, `SELECT status, attempt_id FROM operations WHERE tenant = $1 AND run_id = $2 AND operation_key = $3 FOR UPDATE`,
		tenant, pr.RunID, pr.OperationKey).Scan(&st, &att); err != nil {
		return err
	}
	if st != "dispatching" || att != attemptID {
		return fmt.Errorf("settle: operation is %s for attempt %s", st, att)
	}
	var committed, held int64
	if err := tx.QueryRow(ctx, `UPDATE resources SET held = held - $2, committed = committed + $2 WHERE id = $1 RETURNING committed, held`,
		res, amt).Scan(&committed, &held); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE operations SET status = 'applied', provider_ref = $4, updated_at = now()
WHERE tenant = $1 AND run_id = $2 AND operation_key = $3`, tenant, pr.RunID, pr.OperationKey, ref); err != nil {
		return err
	}
	if err := p.audit(ctx, tx, auditRecord{Tenant: tenant, OperationID: opID, AttemptID: attemptID, Decision: "applied", Principal: principal,
		ActionDigest: digest, Resource: res, Amount: amt, Committed: committed, Held: held}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// audit signs the record and inserts it in tx.
func (p *GovernedPeer) audit(ctx context.Context, tx pgx.Tx, r auditRecord) error {
	r.At = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO audit (tenant, operation_id, decision, record, signature) VALUES ($1, $2, $3, $4, $5)`,
		r.Tenant, r.OperationID, r.Decision, b, codec.SignBytes(p.key, b))
	return err
}

// VerifyAudit checks every audit row's signature and returns how many there
// are: the peer's evidence is what it claims to be.
func (p *GovernedPeer) VerifyAudit(ctx context.Context) (int, error) {
	rows, err := p.pg.Pool.Query(ctx, `SELECT record, signature FROM audit`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	pub := p.key.Public().(ed25519.PublicKey)
	n := 0
	for rows.Next() {
		var rec, sig []byte
		if err := rows.Scan(&rec, &sig); err != nil {
			return n, err
		}
		if !codec.VerifyBytes(pub, rec, sig) {
			return n, fmt.Errorf("audit row %d: bad signature", n)
		}
		n++
	}
	return n, rows.Err()
}
