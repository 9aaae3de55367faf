// Package config is the daemon's configuration: one TOML file
// (docs/config.md), a file of this package per section (nats.go,
// runtime.go, limits.go, telemetry.go, witness.go, tenants.go,
// capabilities.go with controls.go, guarantees.go, console.go, mcp.go), each
// with its validation, and hostile.go with the rules they share: endpoints
// (https, or http to loopback; no credentials in a URL), provider timeouts
// and passwords. It reads and checks values; it decides nothing about
// a proposal (whether a capability needs an approval, what a run budget
// reads: those are the gateway's and the kernel's).
//
// Load reads a file, Parse bytes; both validate, so what they return can
// be handed to the runtime as it is:
//
//	cfg, err := config.Load("contextos.toml")
//	if err != nil {
//		return err // names the key and why
//	}
//	for _, t := range cfg.Tenants {
//		if cp, ok := cfg.Capability(id); ok && t.IsOperator(who) { ... }
//	}
//
// A configuration changed in code after loading is checked again with
// Validate (daemon.Boot does).
package config
