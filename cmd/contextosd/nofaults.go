//go:build !faults

package main

import "github.com/contextos/ledger/gateway"

// faultHooks are none in the production binary (see faults.go).
func faultHooks() gateway.Hooks { return gateway.Hooks{} }
