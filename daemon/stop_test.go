package daemon_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// TestGracefulStopAnswersTakenRequests: a runtime closed while a proposal
// it took is at the provider stops taking new requests at once (a new one
// finds no responders) and still answers the one it took, applied, before
// Close returns.
func TestGracefulStopAnswersTakenRequests(t *testing.T) {
	atProvider, release := make(chan struct{}, 1), make(chan struct{})
	// The provider is held for as long as the test takes to see the stop
	// begin, well within the refund's timeout.
	e := startEnvWith(t, daemontest.Options{Edit: func(text string) string {
		return refundcfg.Replace(text, `timeout = "500ms"`, `timeout = "30s"`)
	}, Provider: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				select {
				case atProvider <- struct{}{}:
				default:
				}
				<-release
			}
			h.ServeHTTP(w, r)
		})
	}})
	agent := e.client("acme", "agent_email")
	body, err := json.Marshal(refund("run_stop", "stop-1", "ord_stop", 1000))
	if err != nil {
		t.Fatal(err)
	}
	replied := make(chan *nats.Msg, 1)
	failed := make(chan error, 1)
	go func() {
		m, err := agent.Request(wire.ProposeSubject("acme", "agent_email"), body, 20*time.Second)
		if err != nil {
			failed <- err
			return
		}
		replied <- m
	}()
	select {
	case <-atProvider:
	case err := <-failed:
		t.Fatalf("proposal: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the proposal did not reach the provider")
	}
	closed := make(chan struct{})
	go func() { e.rt.Close(); close(closed) }()
	other, err := json.Marshal(refund("run_stop", "stop-2", "ord_stop2", 1000))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() bool {
		_, err := agent.Request(wire.ProposeSubject("acme", "agent_email"), other, 100*time.Millisecond)
		return errors.Is(err, nats.ErrNoResponders)
	}, 10*time.Second, "a stopping runtime takes no new request")
	select {
	case <-closed:
		t.Fatal("Close returned with a request it took still at the provider")
	default:
	}
	close(release)
	select {
	case m := <-replied:
		var r wire.Reply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != wire.StatusApplied {
			t.Fatalf("the taken proposal's reply: %+v", r)
		}
	case err := <-failed:
		t.Fatalf("the taken proposal got no reply: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
}
