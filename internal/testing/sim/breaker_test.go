package sim

import (
	"strings"
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestBreakerTrips runs a provider whose every reply is lost against a
// capability with a circuit breaker: the simulator builds its gateway
// without telemetry, so the breaker trips only if the request path itself
// counts the failures.
func TestBreakerTrips(t *testing.T) {
	o := Options{Seed: 7, Steps: 40, Replicas: 1, BreakerThreshold: 2, Behaviours: [7]int{LostReply: 1}}
	r := Run(o)
	if r.Failure != nil {
		t.Fatalf("seed %d: %v", r.Seed, r.Failure)
	}
	var open int
	for _, line := range r.Trace {
		if strings.Contains(line, ": refused "+string(wire.CodeBreakerOpen)+" ") {
			open++
		}
	}
	if open == 0 {
		t.Fatalf("no proposal was refused %s after %d proposals whose provider replies were all lost:\n%s", wire.CodeBreakerOpen, r.Proposals, strings.Join(r.Trace, "\n"))
	}
}
