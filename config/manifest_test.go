package config

import (
	"testing"
	"time"

	"github.com/contextos/ledger/kernel"
)

const manifestConfig = `
[nats]
data_dir = "d"

[runtime]
max_proposal_bytes = 4096

[[tenants]]
id = "acme"
unadmitted_runs = "unlimited"
  [[tenants.agents]]
  id = "agent_a"
  password = "a-secret-passphrase"
  capabilities = ["pay.refund"]
  evidence_sources = ["crm"]

[[capabilities]]
id = "pay.refund"
version = "3"
risk = "high"
effectful = true
adapter = "http"
same_action_fence = false
  [capabilities.http]
  url = "http://127.0.0.1:9/refunds"
  timeout = "2s"
  [capabilities.recovery]
  completion = "/refund/status"
  applied = ["succeeded"]
  not_applied = ["failed"]
  pending = ["pending"]
  query_url = "http://127.0.0.1:9/refunds/{idempotency_key}"
  [capabilities.policy]
  amount_pointer = "/amount_minor"
  max_amount = 500
  [capabilities.breaker]
  threshold = 3
  window = "1m"

[[guarantees]]
id = "per-order"
capability_ids = ["pay.refund"]
resource_pointer = "/order_id"
amount_pointer = "/amount_minor"
limit = 1000
unit = "INR_minor"
`

// TestManifest: the manifest carries what the kernel's proposal checks read
// from the configuration: the run amount falls back to the policy's
// pointer, the same-action fence follows its switch, the grace follows the
// adapter's timeout, the tenant's agents, pins and unadmitted runs.
func TestManifest(t *testing.T) {
	c, err := Parse([]byte(manifestConfig))
	if err != nil {
		t.Fatal(err)
	}
	pin := kernel.PinnedGuarantee{Pin: &kernel.Pin{Tenant: "acme", Definition: c.Guarantees[0], Digest: c.Guarantees[0].Digest()}}
	m := c.Manifest(map[string]map[string]kernel.PinnedGuarantee{"acme": {"per-order": pin}})
	cp, ok := m.Capability("pay.refund")
	if !ok {
		t.Fatal("pay.refund is not in the manifest")
	}
	if cp.Version != "3" || cp.Risk != "high" || !cp.ApprovalRequiredBy() || cp.RunAmount != "/amount_minor" || cp.SameActionFenced() ||
		cp.Grace != 5*time.Second || cp.Breaker != (kernel.BreakerRule{Threshold: 3, Window: time.Minute}) || cp.CompiledPolicy().Digest() != c.Capabilities[0].CompiledPolicy().Digest() {
		t.Fatalf("capability %+v", cp)
	}
	tn, ok := m.Tenant("acme")
	if !ok || !tn.AllowUnadmitted || tn.Pins["per-order"].Pin != pin.Pin {
		t.Fatalf("tenant %+v", tn)
	}
	a := tn.Agents["agent_a"]
	if a == nil || !a.Grants("pay.refund") || len(a.EvidenceSources) != 1 {
		t.Fatalf("agent %+v", a)
	}
	if len(m.GuaranteesFor("pay.refund")) != 1 || m.MaxProposalBytes != 4096 || m.Digest != c.Digest || m.Digest == "" {
		t.Fatalf("manifest %+v", m)
	}
}
