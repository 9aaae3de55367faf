package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestGovernedPeer runs proposals through the PostgreSQL peer from the
// bench's client loop and checks what it stored: every proposal applied,
// the resources' balances equal to the proposals, nothing left held, two
// audit rows per proposal whose signatures verify, a resent proposal
// answered from its operation without a second dispatch, and the server's
// CPU readable from its processes.
func TestGovernedPeer(t *testing.T) {
	if _, err := FindPostgres(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	// Not t.TempDir: as root the server runs as the postgres user, which
	// must reach the directory.
	dir, err := TempDir()
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(dir)
	pg, err := StartPostgres(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	gp, err := StartGovernedPeer(ctx, pg, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer gp.Close()
	pick := func(w, i int) string { return fmt.Sprintf("order-%d", i%3) }
	op := gp.Proposals(pick)
	const perWorker = 5
	errs := make(chan error, 4*perWorker)
	for w := 0; w < 4; w++ {
		go func(w int) {
			for i := 0; i < perWorker; i++ {
				errs <- op(ctx, w, i)
			}
		}(w)
	}
	for i := 0; i < 4*perWorker; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var committed, held int64
	if err := pg.Pool.QueryRow(ctx, `SELECT sum(committed), sum(held) FROM resources WHERE id LIKE 'order-%'`).Scan(&committed, &held); err != nil {
		t.Fatal(err)
	}
	if committed != 4*perWorker || held != 0 {
		t.Fatalf("committed %d held %d, want %d and 0", committed, held, 4*perWorker)
	}
	if n, err := gp.VerifyAudit(ctx); err != nil || n != 2*4*perWorker {
		t.Fatalf("audit: %d rows verified (%v), want %d", n, err, 2*4*perWorker)
	}
	// The server's CPU is readable, as make bench reads it: the
	// postmaster's and its backends'.
	if pid, err := pg.PID(); err != nil {
		t.Fatal(err)
	} else if st, err := ReadProcStat(pid); err != nil || st.PPID == pid {
		t.Fatalf("postmaster %d: %+v %v", pid, st, err)
	}
	if cpu, err := pg.CPU(); err != nil || cpu <= 0 {
		t.Fatalf("PostgreSQL CPU %v (%v)", cpu, err)
	}

	// The same proposal again: the operation answers, nothing is dispatched.
	body, _ := json.Marshal(map[string]any{"run_id": "again", "operation_key": "k", "capability_id": Def.CapabilityIDs[0],
		"arguments": map[string]any{"order_id": "order-again", "amount_minor": 1, "currency": "INR"}})
	first := gp.Propose(ctx, Tenant, "agent_00", body)
	calls := gp.prov.Stats().Calls
	again := gp.Propose(ctx, Tenant, "agent_00", body)
	if first.Status != wire.StatusApplied || again.Status != wire.StatusApplied || again.OperationID != first.OperationID {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	if c := gp.prov.Stats().Calls; c != calls {
		t.Fatalf("provider called %d more times for a resent proposal", c-calls)
	}
	// Another action under the same key is refused; an agent without the
	// grant is refused.
	other, _ := json.Marshal(map[string]any{"run_id": "again", "operation_key": "k", "capability_id": Def.CapabilityIDs[0],
		"arguments": map[string]any{"order_id": "order-again", "amount_minor": 2, "currency": "INR"}})
	if r := gp.Propose(ctx, Tenant, "agent_00", other); r.Code != wire.CodeOperationConflict {
		t.Fatalf("key reused for another action: %+v", r)
	}
	stranger, _ := json.Marshal(map[string]any{"run_id": "stranger", "operation_key": "k", "capability_id": Def.CapabilityIDs[0],
		"arguments": map[string]any{"order_id": "order-again", "amount_minor": 1, "currency": "INR"}})
	if r := gp.Propose(ctx, Tenant, "agent_99", stranger); r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("agent without a grant: %+v", r)
	}
}
