package config

import (
	"testing"
	"time"

	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
)

// manifestConfig is the refund configuration with every key the manifest
// reads set away from its default: the run's limit on proposal size,
// agent_email's evidence sources, and a refund of version 3 at high risk,
// unfenced, with a 2s timeout, a policy reading the amount and a breaker.
func manifestConfig() string {
	text := refundcfg.Replace(refundcfg.Text("d", "http://127.0.0.1:9"),
		"executor = \"test-1\"\n", "executor = \"test-1\"\nmax_proposal_bytes = 4096\n",
		`  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
`, `  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
  evidence_sources = ["crm"]
`)
	text = refundcfg.EditBlock(text, "capabilities", refundcfg.Capability,
		`version = "1"`, `version = "3"`,
		`risk = "medium"`, `risk = "high"`,
		"adapter = \"http\"\n", "adapter = \"http\"\nsame_action_fence = false\n",
		`timeout = "500ms"`, `timeout = "2s"`)
	return refundcfg.AppendToBlock(text, "capabilities", refundcfg.Capability, `  [capabilities.policy]
  amount_pointer = "/amount_minor"
  max_amount = 500
  [capabilities.breaker]
  threshold = 3
  window = "1m"`)
}

// TestManifest: the manifest carries what the kernel's proposal checks read
// from the configuration: the run amount falls back to the policy's
// pointer, the same-action fence follows its switch, the grace follows the
// adapter's timeout, the tenant's agents, pins and unadmitted runs.
func TestManifest(t *testing.T) {
	c, err := Parse([]byte(manifestConfig()))
	if err != nil {
		t.Fatal(err)
	}
	pin := kernel.PinnedGuarantee{Pin: &kernel.Pin{Tenant: "acme", Definition: c.Guarantees[0], Digest: c.Guarantees[0].Digest()}}
	m := c.Manifest(map[string]map[string]kernel.PinnedGuarantee{"acme": {refundcfg.Guarantee: pin}})
	cp, ok := m.Capability(refundcfg.Capability)
	if !ok {
		t.Fatal("the refund is not in the manifest")
	}
	if cp.Version != "3" || cp.Risk != "high" || !cp.ApprovalRequiredBy() || cp.RunAmount != "/amount_minor" || cp.SameActionFenced() ||
		cp.Grace != 5*time.Second || cp.Breaker != (kernel.BreakerRule{Threshold: 3, Window: time.Minute}) || cp.CompiledPolicy().Digest() != c.Capabilities[0].CompiledPolicy().Digest() {
		t.Fatalf("capability %+v", cp)
	}
	tn, ok := m.Tenant("acme")
	if !ok || !tn.AllowUnadmitted || tn.Pins[refundcfg.Guarantee].Pin != pin.Pin {
		t.Fatalf("tenant %+v", tn)
	}
	a := tn.Agents["agent_email"]
	if a == nil || !a.Grants(refundcfg.Capability) || len(a.EvidenceSources) != 1 {
		t.Fatalf("agent %+v", a)
	}
	if len(m.GuaranteesFor(refundcfg.Capability)) != 1 || m.MaxProposalBytes != 4096 || m.Digest != c.Digest || m.Digest == "" {
		t.Fatalf("manifest %+v", m)
	}
}
