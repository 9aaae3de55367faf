package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
)

// TestCrashChild is the runtime process of the crash tests: it boots on the
// parent's data dir, prints its URL and SIGKILLs itself at the named point.
func TestCrashChild(t *testing.T) {
	point := os.Getenv("CTX_CRASH_AT")
	if point == "" {
		return
	}
	kill := func(string) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	hooks := gateway.Hooks{}
	if point == "after-dispatch-start" {
		hooks.AfterDispatchStart = kill
	} else {
		hooks.AfterProviderCall = kill
	}
	// The parent's data dir and provider, which the parent restarts on.
	parent := &daemontest.Daemon{Dir: os.Getenv("CTX_DATA"), ProviderURL: os.Getenv("CTX_PROVIDER")}
	d, err := daemontest.Start(t, gatewayOptions(daemontest.Options{Of: parent, Boot: daemon.BootOptions{Hooks: hooks}}))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("URL", d.RT.URL)
	select {}
}

// TestKilledDuringDispatch: the daemon is SIGKILLed after dispatch-start
// (before the provider call) or after the provider call (before the
// observation). After restart the hold stays, close-attempt is refused with
// shared_guarantee_dispatch_active, and reconciliation with the provider
// resolves it: an applied refund commits; a provider that never saw the call
// leaves the hold until an operator asserts absence with an artifact.
func TestKilledDuringDispatch(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, point := range []string{"after-dispatch-start", "after-provider-call"} {
		t.Run(point, func(t *testing.T) {
			prov := provider.New()
			hs := httptest.NewServer(prov.Handler())
			defer hs.Close()
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
			cmd.Env = append(os.Environ(), "CTX_CRASH_AT="+point, "CTX_DATA="+dir, "CTX_PROVIDER="+hs.URL)
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "URL ") {
				t.Fatalf("child: %q %v", line, err)
			}
			e := &env{t: t, prov: prov, d: &daemontest.Daemon{Provider: prov, Dir: dir, ProviderURL: hs.URL},
				rt: &daemon.Runtime{URL: strings.TrimSpace(strings.TrimPrefix(line, "URL "))}}
			nc := e.client("acme", "agent_email")
			b, _ := json.Marshal(refund("run_c", "crash-1", "ord_881", 80000))
			if _, err := nc.Request(wire.ProposeSubject("acme", "agent_email"), b, 5*time.Second); err == nil {
				t.Fatal("the killed runtime answered")
			}
			if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("child did not die by SIGKILL: %v", err)
			}
			nc.Close()

			e.restart(daemontest.Options{}) // on the same data dir
			rows := e.op("attempts", wire.OpRequest{}).Attempts
			if len(rows) != 1 || rows[0].State != "started" || rows[0].Amount != 80000 {
				t.Fatalf("after restart: %+v", rows)
			}
			attempt := rows[0].AttemptID
			if r := e.op("close-attempt", wire.OpRequest{AttemptID: attempt}); r.Code != wire.CodeDispatchActive {
				t.Fatalf("close-attempt: %+v", r)
			}
			var settled wire.SettleRow
			deadline := time.Now().Add(15 * time.Second)
			for {
				rec := e.op("reconcile", wire.OpRequest{AttemptID: attempt})
				settled = rec.Settled[0]
				if settled.Code != wire.CodeDispatchActive || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond) // the grace period is wall-clock time
			}
			bal := e.op("exposure", wire.OpRequest{Resource: "ord_881"}).Exposure[0].Balance
			switch point {
			case "after-provider-call":
				if settled.Outcome != wire.OutcomeApplied || bal != (wire.Balance{Limit: 100000, Committed: 80000, Available: 20000}) {
					t.Fatalf("reconcile: %+v, balance %+v", settled, bal)
				}
				if st := prov.Stats(); st.Calls != 1 || st.Applied != 1 {
					t.Fatalf("provider %+v", st)
				}
			case "after-dispatch-start":
				if settled.Outcome != wire.OutcomeUnknown || bal.Held != 80000 {
					t.Fatalf("reconcile of a call that never arrived: %+v, balance %+v", settled, bal)
				}
				if r := e.op("assert-absence", wire.OpRequest{AttemptID: attempt, ArtifactRef: "psp-ledger-export-2026-11-30.csv"}); !r.OK {
					t.Fatalf("assert-absence: %+v", r)
				}
				bal = e.op("exposure", wire.OpRequest{Resource: "ord_881"}).Exposure[0].Balance
				if bal != (wire.Balance{Limit: 100000, Available: 100000}) || prov.Stats().Calls != 0 {
					t.Fatalf("after assertion: %+v, provider %+v", bal, prov.Stats())
				}
			}
		})
	}
}
