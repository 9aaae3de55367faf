package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Observation is what an adapter learned about an attempt.
type Observation struct {
	Outcome kernel.Outcome
	// Ref is what the provider reported (its state, or the HTTP status),
	// recorded with the observation. When the provider could not be
	// reached or did not answer under its contract, it says why
	// ("provider unreachable: ...", "provider timed out after 5s",
	// "provider answered 503 Service Unavailable").
	Ref string
	// Failure is the kind of provider failure behind an unknown outcome
	// (one of the Failure constants), empty when the provider answered
	// under its recovery contract.
	Failure string
}

// Kinds of provider failure (Observation.Failure), the values of the
// provider errors metric's kind label.
const (
	FailureTransport    = "transport"     // no connection, or it broke before a reply
	FailureTimeout      = "timeout"       // no reply within http.timeout
	FailureStatus5xx    = "status_5xx"    // a 5xx the contract does not list as not applied
	FailureStatusOther  = "status_other"  // another non-2xx the contract does not list
	FailureBrokenReply  = "broken_reply"  // the reply body could not be read
	FailureUnrecognized = "unrecognized"  // a 2xx whose state the contract does not list
	FailureRequest      = "request_error" // the request could not be built
)

// maxReasonBytes bounds the reason an observation records: it is stored in
// signed events.
const maxReasonBytes = 300

// Adapter calls a provider. Dispatch is called at most once per attempt,
// after its durable dispatch-start; Query asks about an attempt later by its
// idempotency key (the attempt id).
type Adapter interface {
	Dispatch(ctx context.Context, attemptID string, args json.RawMessage) Observation
	Query(ctx context.Context, attemptID string) Observation
}

// HTTPAdapter calls an HTTP provider under a recovery contract.
type HTTPAdapter struct {
	Cap      *config.CapabilityConfig
	Contract kernel.RecoveryContract
	Client   *http.Client
}

// NewHTTPAdapter returns the adapter of an http capability.
func NewHTTPAdapter(cp *config.CapabilityConfig) *HTTPAdapter {
	r := cp.Recovery
	return &HTTPAdapter{
		Cap: cp,
		Contract: kernel.RecoveryContract{Completion: r.Completion, Applied: r.Applied, NotApplied: r.NotApplied,
			Pending: r.Pending, NotAppliedStatuses: r.NotAppliedStatuses},
		Client: &http.Client{Timeout: cp.HTTP.Timeout.Duration, Transport: providerTransport(cp.HTTP.TLS()),
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
	return a.call("dispatch", a.Contract.Classify, append([]string{a.Cap.HTTP.URL}, a.Cap.HTTP.FallbackURLs...), func(u string) (*http.Request, error) {
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
	return a.call("query", a.Contract.ClassifyQuery, append([]string{a.Cap.Recovery.QueryURL}, a.Cap.Recovery.FallbackQueryURLs...), func(u string) (*http.Request, error) {
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
func (a *HTTPAdapter) call(name string, classify func(kernel.ProviderReply) (kernel.Outcome, string), endpoints []string, build func(string) (*http.Request, error)) Observation {
	var obs Observation
	for _, u := range endpoints {
		req, err := build(u)
		if err != nil {
			return Observation{Outcome: kernel.OutcomeUnknown, Ref: clip("request: " + err.Error()), Failure: FailureRequest}
		}
		for k, v := range a.Cap.HTTP.HeaderValues() {
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
		obs = a.do(req, name, classify)
		if gotConn.Load() || !dialFailed.Load() {
			return obs
		}
	}
	return obs
}

// do sends req inside a client span whose W3C trace context goes to the
// provider in the traceparent header (the span is non-recording when
// tracing is off, and then carries the agent's trace context, if any).
func (a *HTTPAdapter) do(req *http.Request, call string, classify func(kernel.ProviderReply) (kernel.Outcome, string)) Observation {
	ctx, span := trace.SpanFromContext(req.Context()).TracerProvider().Tracer(tracerName).Start(req.Context(), "provider."+call,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("capability", a.Cap.ID),
			attribute.String("http.request.method", req.Method), attribute.String("url.path", req.URL.Path)))
	defer span.End()
	req = req.WithContext(ctx)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	obs := a.send(req, classify)
	if obs.Failure != "" {
		span.SetStatus(codes.Error, obs.Ref)
	}
	return obs
}

func (a *HTTPAdapter) send(req *http.Request, classify func(kernel.ProviderReply) (kernel.Outcome, string)) Observation {
	resp, err := a.Client.Do(req)
	if err != nil {
		return transportFailure(err, a.Client.Timeout)
	}
	defer resp.Body.Close()
	trace.SpanFromContext(req.Context()).SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: clip(fmt.Sprintf("provider reply broken (%d %s): %v", resp.StatusCode, http.StatusText(resp.StatusCode), err)),
			Failure: FailureBrokenReply}
	}
	out, state := classify(kernel.ProviderReply{Status: resp.StatusCode, Body: body})
	ref := "http " + http.StatusText(resp.StatusCode)
	if state != "" {
		ref = state
	}
	obs := Observation{Outcome: out, Ref: ref}
	if out == kernel.OutcomeUnknown {
		ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
		switch {
		case ok:
			obs.Failure = FailureUnrecognized
			obs.Ref = clip(fmt.Sprintf("provider answered %d with state %q, which the recovery contract does not list", resp.StatusCode, state))
		case resp.StatusCode >= 500:
			obs.Failure = FailureStatus5xx
		default:
			obs.Failure = FailureStatusOther
		}
		if !ok {
			obs.Ref = fmt.Sprintf("provider answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		}
	}
	return obs
}

// transportFailure describes a call that got no reply. The URL is left out
// of the reason (it may carry credentials): *url.Error's inner error names
// the address and what went wrong.
func transportFailure(err error, timeout time.Duration) Observation {
	var ue *url.Error
	inner := err
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	if ue != nil && ue.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: fmt.Sprintf("provider timed out after %s", timeout), Failure: FailureTimeout}
	}
	return Observation{Outcome: kernel.OutcomeUnknown, Ref: clip("provider unreachable: " + inner.Error()), Failure: FailureTransport}
}

func clip(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	s = s[:maxReasonBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
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
