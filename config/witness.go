package config

import (
	"fmt"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/kernel"
)

// WitnessConfig is one witness the runtime asks to cosign its audit
// checkpoints ([[runtime.witnesses]]): a C2SP tlog-witness.
type WitnessConfig struct {
	// URL is the witness's submission prefix: https, or http to a
	// loopback host, with no credentials in it.
	URL string `toml:"url"`
	// Key is the witness's cosignature verifier key
	// (<name>+<hash>+<key>, as "ctx witness serve" prints it).
	Key string `toml:"key"`
}

// validateAudit checks the audit settings of the runtime section.
func (r *RuntimeConfig) validateAudit() error {
	if err := r.validateWitnessPolicy(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, w := range r.Witnesses {
		if err := checkEndpoint(w.URL, false); err != nil {
			return fmt.Errorf("runtime.witnesses[%d].url: %w", i, err)
		}
		c, err := audit.ParseCosignerKey(w.Key)
		if err != nil {
			return fmt.Errorf("runtime.witnesses[%d].key: %w", i, err)
		}
		if seen[c.Name()] {
			return fmt.Errorf("runtime.witnesses[%d]: witness %q configured twice", i, c.Name())
		}
		seen[c.Name()] = true
	}
	return nil
}

// WitnessPolicy is the configured witness policy: "" without witnesses,
// else runtime.witness_policy (require by default).
func (c *Config) WitnessPolicy() kernel.WitnessPolicy {
	if len(c.Runtime.Witnesses) == 0 {
		return ""
	}
	if c.Runtime.WitnessPolicy == "" {
		return kernel.WitnessRequire
	}
	return kernel.WitnessPolicy(c.Runtime.WitnessPolicy)
}

// validateWitnessPolicy checks runtime.witness_policy.
func (r *RuntimeConfig) validateWitnessPolicy() error {
	switch kernel.WitnessPolicy(r.WitnessPolicy) {
	case "", kernel.WitnessWarn, kernel.WitnessRequire:
		return nil
	}
	return fmt.Errorf("runtime.witness_policy %q: want %q or %q", r.WitnessPolicy, kernel.WitnessWarn, kernel.WitnessRequire)
}
