package chaos

import (
	"testing"

	"github.com/contextos/ledger/config"
)

// TestRunConfig: a run's configuration parses, with its agents, the refund
// at the run's provider timeout, the per-order ceiling at limit and the
// windowed ceiling beside it at twice that; an owning run's has
// [nats.ownership] on and the rest the same.
func TestRunConfig(t *testing.T) {
	r := &run{o: Options{Agents: 3}, pw: "chaos-runtime-secret"}
	cfg, err := config.Parse([]byte(r.config("http://127.0.0.1:9", "nats://127.0.0.1:4222", "/k/runtime.key", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tenants) != 1 || len(cfg.Tenants[0].Agents) != 3 {
		t.Fatalf("tenants %+v", cfg.Tenants)
	}
	cp, ok := cfg.Capability(Capability)
	if !ok || cp.HTTP.Timeout.Duration != providerTimeout || cp.HTTP.URL != "http://127.0.0.1:9/refunds" {
		t.Fatalf("capability %+v", cp)
	}
	if len(cfg.Guarantees) != 2 || cfg.Guarantees[0].ID != guaranteeID || cfg.Guarantees[0].Limit != limit ||
		cfg.Guarantees[1].Limit != 2*limit || cfg.Guarantees[1].Window != "day" || cfg.Guarantees[1].TimeZone != "Asia/Kolkata" {
		t.Fatalf("guarantees %+v", cfg.Guarantees)
	}
	if cfg.NATS.Ownership.Enabled {
		t.Fatal("ownership on in a run without it")
	}
	r.o.Ownership = true
	owning, err := config.Parse([]byte(r.config("http://127.0.0.1:9", "nats://127.0.0.1:4222", "/k/runtime.key", 3)))
	if err != nil {
		t.Fatal(err)
	}
	if !owning.NATS.Ownership.Enabled || owning.NATS.Replicas != 3 || len(owning.Guarantees) != 2 {
		t.Fatalf("an owning run's configuration: nats %+v, %d guarantees", owning.NATS, len(owning.Guarantees))
	}
}
