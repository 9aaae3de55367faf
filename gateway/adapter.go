package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"

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
		Client: &http.Client{Timeout: cp.HTTP.Timeout.Duration, Transport: providerTransport(cp.HTTP.tls),
			// A redirect is the provider's answer, not an instruction to
			// send the call (and its credentials) somewhere else: the 3xx is
			// classified as it is (unknown, unless the contract says more).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// MaxProviderConns bounds the idle connections an adapter keeps to its
// provider.
const MaxProviderConns = 256

// providerTransport is http.DefaultTransport's configuration with room to
// keep a connection per concurrent call: the default keeps two idle
// connections per host, so under concurrent proposals nearly every call
// dialled a new TCP connection (and left one in TIME_WAIT). tc, when set,
// carries the capability's CA and client certificate.
func providerTransport(tc *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = MaxProviderConns, MaxProviderConns
	if tc != nil {
		t.TLSClientConfig = tc.Clone()
	}
	return t
}

// Dispatch sends the arguments with the attempt id as idempotency key, to
// http.url or, only while no connection could be made, to the next of
// http.fallback_urls.
func (a *HTTPAdapter) Dispatch(ctx context.Context, attemptID string, args json.RawMessage) Observation {
	return a.call(append([]string{a.Cap.HTTP.URL}, a.Cap.HTTP.FallbackURLs...), func(u string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, a.Cap.HTTP.Method, u, bytes.NewReader(args))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(a.Cap.HTTP.IdempotencyHeader, attemptID)
		return req, nil
	})
}

// Query looks the attempt up by its idempotency key.
func (a *HTTPAdapter) Query(ctx context.Context, attemptID string) Observation {
	return a.call(append([]string{a.Cap.Recovery.QueryURL}, a.Cap.Recovery.FallbackQueryURLs...), func(u string) (*http.Request, error) {
		u = strings.ReplaceAll(u, "{idempotency_key}", url.PathEscape(attemptID))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set(a.Cap.HTTP.IdempotencyHeader, attemptID)
		return req, nil
	})
}

// call sends one request to the first endpoint and moves to the next only
// when the request provably never left: no connection was ever handed to
// it (httptrace GotConn) and a dial failed (ConnectDone with an error, say
// connection refused). A request that got a connection may have been
// received, whatever happened next (a timeout, a reset, a 5xx), so it is
// never sent to another endpoint: its observation stands, and an
// effectful call is unknown until reconciled.
func (a *HTTPAdapter) call(endpoints []string, build func(string) (*http.Request, error)) Observation {
	var obs Observation
	for _, u := range endpoints {
		req, err := build(u)
		if err != nil {
			return Observation{Outcome: kernel.OutcomeUnknown, Ref: "request: " + err.Error()}
		}
		for k, v := range a.Cap.HTTP.headers {
			req.Header[k] = v
		}
		var gotConn, dialFailed atomic.Bool
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
			ConnectDone: func(_, _ string, err error) {
				if err != nil {
					dialFailed.Store(true)
				}
			},
		}))
		obs = a.do(req)
		if gotConn.Load() || !dialFailed.Load() {
			return obs
		}
	}
	return obs
}

func (a *HTTPAdapter) do(req *http.Request) Observation {
	resp, err := a.Client.Do(req)
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "transport error"}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "broken reply"}
	}
	out, state := a.Contract.Classify(kernel.ProviderReply{Status: resp.StatusCode, Body: body})
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
