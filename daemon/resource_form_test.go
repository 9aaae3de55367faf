package daemon_test

import (
	"encoding/json"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestLookAlikeResourceRefused: under a guarantee declaring ascii-token,
// the zero-width and full-width spellings of an order id are refused
// before anything is reserved or sent, and the plain id is served.
func TestLookAlikeResourceRefused(t *testing.T) {
	e := startEnvWith(t, daemontest.Options{Config: func(cfg *config.Config) { cfg.Guarantees[0].ResourceForm = kernel.ResourceFormASCIIToken }})
	prov := e.prov
	nc := e.client("acme", "agent_email")
	for i, id := range []string{"ord_7\u200b", "ｏｒｄ＿７", "cafe\u0301"} {
		r := e.propose(nc, "acme", "agent_email", refund("run_la", "la-"+string(rune('a'+i)), id, 60000))
		if r.Status != wire.StatusRefused || r.Code != wire.CodeResourceInvalid {
			t.Fatalf("%q: %+v", id, r)
		}
	}
	if n := prov.Stats().Calls; n != 0 {
		t.Fatalf("the provider got %d calls", n)
	}
	if r := e.propose(nc, "acme", "agent_email", refund("run_la", "la-plain", "ord_7", 60000)); r.Status != wire.StatusApplied {
		t.Fatalf("plain id: %+v", r)
	}
}

// TestAmount1e400: 1e400 as a refund's amount is refused as an invalid
// amount, not as a malformed request with advice that is refused too.
func TestAmount1e400(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	p := refund("run_big", "big-1", "ord_big", 1)
	p["arguments"].(map[string]any)["amount_minor"] = json.RawMessage("1e400")
	if r := e.propose(nc, "acme", "agent_email", p); r.Status != wire.StatusRefused || r.Code != wire.CodeAmountInvalid {
		t.Fatalf("1e400: %+v", r)
	}
	if n := e.prov.Stats().Calls; n != 0 {
		t.Fatalf("the provider got %d calls", n)
	}
}
