package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/contextos/ledger/kernel"
)

// Observation is what an adapter learned about an attempt.
type Observation struct {
	Outcome kernel.Outcome
	// Ref is what the provider reported (its state, or the HTTP status),
	// recorded with the observation.
	Ref string
}

// Adapter calls a provider. Dispatch is called at most once per attempt,
// after its durable dispatch-start; Query asks about an attempt later by its
// idempotency key (the attempt id).
type Adapter interface {
	Dispatch(ctx context.Context, attemptID string, args json.RawMessage) Observation
	Query(ctx context.Context, attemptID string) Observation
}

// HTTPAdapter calls an HTTP provider under a recovery contract.
type HTTPAdapter struct {
	Cap      *CapabilityConfig
	Contract kernel.RecoveryContract
	Client   *http.Client
}

// NewHTTPAdapter returns the adapter of an http capability.
func NewHTTPAdapter(cp *CapabilityConfig) *HTTPAdapter {
	r := cp.Recovery
	return &HTTPAdapter{
		Cap: cp,
		Contract: kernel.RecoveryContract{Completion: r.Completion, Applied: r.Applied, NotApplied: r.NotApplied,
			Pending: r.Pending, NotAppliedStatuses: r.NotAppliedStatuses},
		Client: &http.Client{Timeout: cp.HTTP.Timeout.Duration, Transport: providerTransport()},
	}
}

// MaxProviderConns bounds the idle connections an adapter keeps to its
// provider.
const MaxProviderConns = 256

// providerTransport is http.DefaultTransport's configuration with room to
// keep a connection per concurrent call: the default keeps two idle
// connections per host, so under concurrent proposals nearly every call
// dialled a new TCP connection (and left one in TIME_WAIT).
func providerTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = MaxProviderConns, MaxProviderConns
	return t
}

// Dispatch sends the arguments with the attempt id as idempotency key.
func (a *HTTPAdapter) Dispatch(ctx context.Context, attemptID string, args json.RawMessage) Observation {
	req, err := http.NewRequestWithContext(ctx, a.Cap.HTTP.Method, a.Cap.HTTP.URL, bytes.NewReader(args))
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(a.Cap.HTTP.IdempotencyHeader, attemptID)
	return a.do(req, a.Contract.Classify)
}

// Query looks the attempt up by its idempotency key.
func (a *HTTPAdapter) Query(ctx context.Context, attemptID string) Observation {
	u := strings.ReplaceAll(a.Cap.Recovery.QueryURL, "{idempotency_key}", url.PathEscape(attemptID))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "request: " + err.Error()}
	}
	req.Header.Set(a.Cap.HTTP.IdempotencyHeader, attemptID)
	return a.do(req, a.Contract.ClassifyQuery)
}

func (a *HTTPAdapter) do(req *http.Request, classify func(kernel.ProviderReply) (kernel.Outcome, string)) Observation {
	resp, err := a.Client.Do(req)
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "transport error"}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "broken reply"}
	}
	out, state := classify(kernel.ProviderReply{Status: resp.StatusCode, Body: body})
	ref := "http " + http.StatusText(resp.StatusCode)
	if state != "" {
		ref = state
	}
	return Observation{Outcome: out, Ref: ref}
}

// noopAdapter serves non-effectful capabilities: nothing can be left
// unknown, so every call is applied.
type noopAdapter struct{}

func (noopAdapter) Dispatch(context.Context, string, json.RawMessage) Observation {
	return Observation{Outcome: kernel.OutcomeApplied, Ref: "noop"}
}

func (noopAdapter) Query(context.Context, string) Observation {
	return Observation{Outcome: kernel.OutcomeApplied, Ref: "noop"}
}
