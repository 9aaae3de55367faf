package aggregates

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// BenchmarkProposeStep: a governed proposal and its settlement, two
// transactions as the gateway makes them, through Run and the kernel's
// steps ("run") and, side by side in the same run, the way before them
// ("tx"): the gateway's checks before the ledger (parse, action binding,
// authority read from the store, pin and extraction), then Engine.Do over
// bound state fields with DecidePropose and DecideSettle. On an in-memory
// store (the CPU of the engine and the kernel) and on an embedded
// JetStream that fsyncs, at 8 and 64 goroutines over 10k resources.
func BenchmarkProposeStep(b *testing.B) {
	m := runManifest()
	m.Capabilities["adp_payments.issue_refund"].Breaker = kernel.BreakerRule{}
	for _, store := range []string{"mem", "jetstream"} {
		var js events.Store
		if store == "jetstream" {
			_, js = startStore(b, b.TempDir())
		}
		for _, c := range []int{8, 64} {
			for _, way := range []string{"tx", "run"} {
				b.Run(fmt.Sprintf("%s/%s/c%d", store, way, c), func(b *testing.B) {
					st := js
					if st == nil {
						st = events.NewMemStore() // each its own: a store that grew would cost the next its scans
					}
					eng := NewEngine(st, testSealer())
					tag := rand.Uint64()
					cpu := cpuNow()
					runParallel(b, c, "proposals", func(w, i int) error {
						in := proposal(m, fmt.Sprintf("%x-%d-%d", tag, w, i), fmt.Sprint("ord-", rand.IntN(10_000)), 1)
						if way == "run" {
							return proposeRun(eng, in)
						}
						return proposeTx(eng, m, in)
					})
					b.ReportMetric((cpuNow()-cpu).Seconds()*1000/float64(b.N), "cpu-ms/proposal")
				})
			}
		}
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func proposeRun(eng *Engine, in kernel.ProposeInput) error {
	ctx := context.Background()
	eff, err := eng.Run(ctx, "acme", in.Step())
	if err != nil {
		return err
	}
	if eff.Dispatch == nil {
		return fmt.Errorf("refused: %v", eff.Refusal)
	}
	set, err := eng.Run(ctx, "acme", eff.Dispatch.Settle(kernel.OutcomeApplied, "rf", in.Now).Step())
	if err == nil && set.Refusal != nil {
		err = set.Refusal
	}
	return err
}

// proposeTx is the proposal path before the steps, as the gateway made it.
func proposeTx(eng *Engine, m *kernel.Manifest, in kernel.ProposeInput) error {
	ctx := context.Background()
	p, r := kernel.ParseProposal(in.Body)
	if r != nil {
		return r
	}
	cp := m.Capabilities[p.CapabilityID]
	tc := m.Tenants[in.Tenant]
	def := m.Guarantees[0].Definition
	ptr, _ := kernel.ParsePointer(def.AmountPointer)
	args, r := kernel.DecodeArguments(p.Arguments, ptr)
	if r != nil {
		return r
	}
	canon, err := kernel.Canonical(json.RawMessage(p.Arguments))
	if err != nil {
		return err
	}
	digest, err := kernel.ActionDigest(kernel.ActionBinding{Tenant: in.Tenant, Principal: in.Principal, RunID: p.RunID, CapabilityID: p.CapabilityID,
		Arguments: canon, CapabilityVersion: cp.Version, PolicyDigest: cp.CompiledPolicy().Digest()})
	if err != nil {
		return err
	}
	aref, _ := RefOf(in.Tenant, kernel.KeyAuthority)
	auth := &kernel.Authority{}
	if _, _, _, err := eng.fold(ctx, aref, auth, 1, 0); err != nil {
		return err
	}
	src, r := kernel.CheckAuthority(auth, in.Principal, cp.ID, true)
	if r != nil {
		return r
	}
	if r := cp.CompiledPolicy().Evaluate(args); r != nil {
		return r
	}
	res, amt, r := def.Extract(args)
	if r != nil {
		return r
	}
	hold := tc.Pins[def.ID].Pin.PinnedHold(res, amt)
	opRef, _ := RefOf(in.Tenant, kernel.KeyOperation(p.RunID, p.OperationKey))
	runRef, _ := RefOf(in.Tenant, kernel.KeyRun(p.RunID))
	ctlRef, _ := RefOf(in.Tenant, kernel.KeyControl)
	intRef, _ := RefOf(in.Tenant, kernel.KeyIntegrity)
	lref, _ := RefOf(in.Tenant, kernel.LedgerKey{GuaranteeID: def.ID, Resource: res}.Key())
	cmd := kernel.Propose{Opened: kernel.OperationOpened{OperationID: in.OperationID, Principal: in.Principal, RunID: p.RunID,
		OperationKey: p.OperationKey, CapabilityID: p.CapabilityID, ActionDigest: digest, Executor: in.Executor},
		AttemptID: in.AttemptID, Holds: []kernel.Hold{hold}, Now: in.Now, RunAmount: amt, AllowUnadmitted: tc.AllowUnadmitted,
		Controls:  kernel.Controls{Authority: src, Executor: in.Executor, CapabilityVersion: cp.Version, Risk: cp.Risk, PolicyDigest: cp.CompiledPolicy().Digest()},
		Arguments: canon, Risk: cp.Risk}
	var st kernel.ProposalState
	var d kernel.ProposalDecision
	bind := []Binding{Bind(opRef, &st.Op, &d.Op)}
	bind = append(bind, BindKey(lref, &st.Ledgers, &d.Ledgers, hold.Key()))
	bind = append(bind, Bind(runRef, &st.Run, &d.Run), Guard(ctlRef, &st.Control), Guard(intRef, &st.Integrity))
	res2, err := eng.Do(ctx, Tx{Tenant: in.Tenant, Bind: bind, Decide: func() *kernel.Refusal { d = kernel.DecidePropose(st, cmd); return d.Refusal }})
	if err != nil {
		return err
	}
	if res2.Refusal != nil {
		return res2.Refusal
	}
	set := kernel.Settle{AttemptID: in.AttemptID, Outcome: kernel.OutcomeApplied, Source: "provider", Ref: "rf", Generation: 1, Now: in.Now,
		Holds: d.Holds, Controls: d.Controls}
	var sst kernel.SettleState
	var sd kernel.SettleDecision
	res3, err := eng.Do(ctx, Tx{Tenant: in.Tenant, Bind: []Binding{Bind(opRef, &sst.Op, &sd.Op), BindKey(lref, &sst.Ledgers, &sd.Ledgers, hold.Key())},
		Decide: func() *kernel.Refusal { sd = kernel.DecideSettle(sst, set); return sd.Refusal }})
	if err == nil && res3.Refusal != nil {
		err = res3.Refusal
	}
	return err
}
