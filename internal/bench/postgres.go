package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is a PostgreSQL server this bench started on loopback in a
// temporary directory (initdb, pg_ctl), with the peer's schema.
type Postgres struct {
	Version string
	bin     string
	dir     string
	port    int
	cred    *syscall.Credential
	Pool    *pgxpool.Pool
}

// FindPostgres returns the directory of Debian's PostgreSQL server
// binaries (postgresql package), newest version first.
func FindPostgres() (string, error) {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("PostgreSQL not found: apt-get install -y postgresql")
	}
	sort.Slice(m, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m[j]))))
		return vi > vj
	})
	return filepath.Dir(m[0]), nil
}

// StartPostgres runs initdb in a new directory under parent and starts the
// server on 127.0.0.1 with synchronous_commit on (fsync before a commit is
// acknowledged). As root it runs the server as the postgres user.
func StartPostgres(ctx context.Context, parent string) (*Postgres, error) {
	bin, err := FindPostgres()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(path, uid, gid)
		}); err != nil {
			return nil, err
		}
		// The parent must be reachable for the postgres user.
		_ = os.Chmod(parent, 0o755)
	}
	data := filepath.Join(dir, "data")
	if out, err := p.run(ctx, "initdb", "-D", data, "-A", "trust", "-U", "bench", "-E", "UTF8", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	opts := fmt.Sprintf("-k /tmp -h 127.0.0.1 -p %d -c synchronous_commit=on -c fsync=on -c max_connections=300 -c shared_buffers=256MB", p.port)
	if out, err := p.run(ctx, "pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		return nil, fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	if out, err := p.run(ctx, "postgres", "--version"); err == nil {
		p.Version = strings.TrimSpace(string(out))
	}
	if err := p.connect(ctx, 8); err != nil {
		p.Stop()
		return nil, err
	}
	if err := p.schema(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd.CombinedOutput()
}

// connect (re)opens the pool with maxConns connections.
func (p *Postgres) connect(ctx context.Context, maxConns int) error {
	if p.Pool != nil {
		p.Pool.Close()
	}
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://bench@127.0.0.1:%d/postgres?sslmode=disable", p.port))
	if err != nil {
		return err
	}
	cfg.MaxConns, cfg.MinConns = int32(maxConns), int32(maxConns)
	p.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return p.Pool.Ping(ctx)
}

// SetSynchronousCommit switches the server's synchronous_commit (on:
// durable; off: relaxed) and reopens the pool with maxConns connections.
func (p *Postgres) SetSynchronousCommit(ctx context.Context, on bool, maxConns int) error {
	v := "off"
	if on {
		v = "on"
	}
	if _, err := p.Pool.Exec(ctx, "ALTER SYSTEM SET synchronous_commit = "+v); err != nil {
		return err
	}
	if _, err := p.Pool.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return p.connect(ctx, maxConns)
}

// schema creates the peer's tables: one row per resource with its limit
// and balances, one row per receipt.
func (p *Postgres) schema(ctx context.Context) error {
	_, err := p.Pool.Exec(ctx, `
CREATE TABLE resources (
  id        text PRIMARY KEY,
  lim       bigint NOT NULL,
  committed bigint NOT NULL DEFAULT 0,
  held      bigint NOT NULL DEFAULT 0,
  receipts  integer NOT NULL DEFAULT 0
);
CREATE TABLE receipts (
  attempt_id   text PRIMARY KEY,
  resource_id  text NOT NULL,
  operation_id text NOT NULL,
  amount       bigint NOT NULL,
  state        text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);`)
	return err
}

// Stop stops the server and removes its directory.
func (p *Postgres) Stop() {
	if p.Pool != nil {
		p.Pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, _ = p.run(ctx, "pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "fast", "-w", "stop")
	_ = os.RemoveAll(p.dir)
}

// ErrExceeded is a reservation the peer refused.
var ErrExceeded = errors.New("exceeded")

// Reserve is the peer's reservation, written the way a team would by hand:
// one transaction that locks the resource row, checks committed + held +
// amount <= limit, inserts the receipt and updates held. A resource seen for
// the first time gets its row first.
func (p *Postgres) Reserve(ctx context.Context, resource, attempt string, amount int64) error {
	tx, err := p.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var lim, committed, held int64
	var receipts int
	q := `SELECT lim, committed, held, receipts FROM resources WHERE id = $1 FOR UPDATE`
	err = tx.QueryRow(ctx, q, resource).Scan(&lim, &committed, &held, &receipts)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err = tx.Exec(ctx, `INSERT INTO resources (id, lim) VALUES ($1, $2) ON CONFLICT DO NOTHING`, resource, Def.Limit); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, q, resource).Scan(&lim, &committed, &held, &receipts)
	}
	if err != nil {
		return err
	}
	if committed+held+amount > lim || receipts >= 1024 {
		return ErrExceeded
	}
	if _, err := tx.Exec(ctx, `INSERT INTO receipts (attempt_id, resource_id, operation_id, amount, state) VALUES ($1, $2, $3, $4, 'reserved')`,
		attempt, resource, "op-"+attempt, amount); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE resources SET held = held + $2, receipts = receipts + 1 WHERE id = $1`, resource, amount); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Reservations reserves amount 1 on the resources pick chooses.
func (p *Postgres) Reservations(pick func(w, i int) string) Op {
	run := rand.Uint64()
	return func(ctx context.Context, w, i int) error {
		return p.Reserve(ctx, pick(w, i), fmt.Sprintf("a%x-%d-%d", run, w, i), 1)
	}
}

// PID is the postmaster's process id (the first line of its
// postmaster.pid).
func (p *Postgres) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// CPU is the CPU time the server's processes have used: the postmaster's,
// its running children's (backends, one per connection, and auxiliary
// processes such as the WAL writer and checkpointer) and its exited
// children's (TreeCPU).
func (p *Postgres) CPU() (time.Duration, error) {
	pid, err := p.PID()
	if err != nil {
		return 0, err
	}
	return TreeCPU(pid)
}
