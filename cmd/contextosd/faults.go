//go:build faults

package main

import (
	"os"
	"syscall"

	"github.com/contextos/ledger/gateway"
)

// faultHooks lets the chaos harness kill this process with SIGKILL at an
// exact point of the dispatch sequence, named by CONTEXTOSD_FAULT. Only a
// binary built with -tags faults has them (internal/testing/chaos builds one); the
// production binary ignores the variable.
func faultHooks() gateway.Hooks {
	kill := func(string) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	switch os.Getenv("CONTEXTOSD_FAULT") {
	case "after-dispatch-start":
		return gateway.Hooks{AfterDispatchStart: kill}
	case "after-provider-call":
		return gateway.Hooks{AfterProviderCall: kill}
	}
	return gateway.Hooks{}
}
