package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/contextos/ledger/kernel"
)

// CapabilityConfig is one pinned capability manifest.
type CapabilityConfig struct {
	ID        string         `toml:"id"`
	Version   string         `toml:"version"`
	Risk      string         `toml:"risk"`
	Effectful bool           `toml:"effectful"`
	Adapter   string         `toml:"adapter"`
	HTTP      HTTPConfig     `toml:"http"`
	Recovery  RecoveryConfig `toml:"recovery"`
	// Approval is "required", "none", or empty: required exactly when the
	// risk is high.
	Approval string `toml:"approval"`
	// AmountPointer is where a proposal's amount is read: what it consumes
	// from its run budget (and what policy.max_amount bounds, unless the
	// policy names its own pointer). Empty: proposals consume calls only.
	AmountPointer string       `toml:"amount_pointer"`
	Policy        PolicyConfig `toml:"policy"`
	// DecisionKey names the decision of ContextPack whose evidence gate
	// must allow commit before the capability is dispatched.
	DecisionKey string `toml:"decision_key"`
	// ContextPack is the path of the context pack (JSON) of DecisionKey,
	// relative to the configuration file.
	ContextPack string `toml:"context_pack"`
	// ArgumentsSchema is the JSON Schema of the arguments (JSON text), the
	// input schema of the capability's MCP tool.
	ArgumentsSchema string        `toml:"arguments_schema"`
	MCP             MCPToolConfig `toml:"mcp"`
	// Breaker trips the capability's switch after repeated provider
	// failures (telemetry.go).
	Breaker BreakerConfig `toml:"breaker"`
	// SameActionFence, when false, turns the same-action fence off for an
	// effectful capability (kernel.SameActionFenced): unset, it is on.
	SameActionFence *bool `toml:"same_action_fence"`

	policy *kernel.CompiledPolicy
	pack   *kernel.ContextPack
}

// PolicyConfig is a capability's [capabilities.policy] table: the
// declarative argument constraints kernel.Policy evaluates.
type PolicyConfig struct {
	MaxAmount     int64           `toml:"max_amount"`
	AmountPointer string          `toml:"amount_pointer"`
	Allowed       []AllowedConfig `toml:"allowed"`
	Pattern       []PatternConfig `toml:"pattern"`
}

// AllowedConfig is a [[capabilities.policy.allowed]] constraint.
type AllowedConfig struct {
	Pointer string   `toml:"pointer"`
	Values  []string `toml:"values"`
}

// PatternConfig is a [[capabilities.policy.pattern]] constraint.
type PatternConfig struct {
	Pointer string `toml:"pointer"`
	Regexp  string `toml:"regexp"`
}

// HTTPConfig is how the HTTP adapter calls the provider.
type HTTPConfig struct {
	URL     string   `toml:"url"`
	Method  string   `toml:"method"`
	Timeout Duration `toml:"timeout"`
	// IdempotencyHeader carries the attempt id (default "Idempotency-Key").
	IdempotencyHeader string `toml:"idempotency_header"`
	// FallbackURLs are other endpoints of the same provider, tried in
	// order only when a call provably never left (no connection could be
	// made to the previous one). A call that may have reached an endpoint
	// is never sent to another: its outcome is unknown until reconciled.
	FallbackURLs []string `toml:"fallback_urls"`
	// AllowHTTP permits plain http:// to a host that is not loopback.
	AllowHTTP bool `toml:"allow_http"`
	// CAFile (PEM) replaces the system roots for this provider's https
	// certificates; CertFile and KeyFile are a client certificate.
	CAFile   string `toml:"ca_file"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// Headers are sent with every call; their values come from a file or
	// an environment variable, never from this file.
	Headers []HeaderConfig `toml:"headers"`

	// tls and headers are what Validate loaded from the files and the
	// environment (unexported: never part of a digest or a log).
	tls     *tls.Config
	headers http.Header
}

// TLS is the client TLS configuration Validate loaded for the provider
// (nil: the default).
func (h *HTTPConfig) TLS() *tls.Config { return h.tls }

// HeaderValues are the headers Validate read from their files and
// environment variables, sent with every provider request.
func (h *HTTPConfig) HeaderValues() http.Header { return h.headers }

// HeaderConfig is a [[capabilities.http.headers]] entry: a header whose
// value is read at start from ValueFile (trailing newlines dropped) or the
// environment variable ValueEnv, after Prefix ("Bearer " for a token).
type HeaderConfig struct {
	Name      string `toml:"name"`
	Prefix    string `toml:"prefix"`
	ValueFile string `toml:"value_file"`
	ValueEnv  string `toml:"value_env"`
}

// RecoveryConfig is an effectful capability's recovery contract.
type RecoveryConfig struct {
	// Completion is the JSON pointer in the provider's reply where the
	// completion state is read.
	Completion string   `toml:"completion"`
	Applied    []string `toml:"applied"`
	NotApplied []string `toml:"not_applied"`
	Pending    []string `toml:"pending"`
	// NotAppliedStatuses are HTTP statuses that prove the effect did not
	// happen; any other non-2xx status is unknown.
	NotAppliedStatuses []int `toml:"not_applied_statuses"`
	// QueryURL looks an attempt up later; "{idempotency_key}" is replaced
	// by the attempt id (path-escaped).
	QueryURL string `toml:"query_url"`
	// FallbackQueryURLs are other endpoints for queries, under the same
	// rule as http.fallback_urls.
	FallbackQueryURLs []string `toml:"fallback_query_urls"`
}

// SameActionFenced reports whether the capability's proposals are fenced
// against an unresolved attempt of the same action (kernel.SameActionFenced).
func (cp *CapabilityConfig) SameActionFenced() bool {
	return kernel.SameActionFenced(cp.Effectful, cp.SameActionFence != nil && !*cp.SameActionFence)
}

func (cp *CapabilityConfig) validate() error {
	switch cp.Risk {
	case "low", "medium", "high":
	default:
		return fmt.Errorf("risk must be low, medium or high, not %q", cp.Risk)
	}
	if err := cp.ValidateMCP(); err != nil {
		return err
	}
	if err := cp.Breaker.validate(); err != nil {
		return err
	}
	switch cp.Adapter {
	case "http":
		if err := cp.HTTP.validate(); err != nil {
			return err
		}
	case "mcp": // ValidateMCP
	case "noop":
		if cp.Effectful {
			return errors.New("an effectful capability cannot use the noop adapter")
		}
	default:
		return fmt.Errorf("adapter must be \"http\", \"mcp\" or \"noop\", not %q", cp.Adapter)
	}
	r := cp.Recovery
	if cp.Effectful && cp.Adapter == "http" {
		if r.Completion == "" {
			return errors.New("an effectful http capability must declare recovery.completion")
		}
		if len(r.Applied) == 0 || len(r.NotApplied) == 0 {
			return errors.New("recovery must list applied and not_applied states")
		}
		if r.QueryURL == "" {
			return errors.New("recovery.query_url is required to reconcile attempts")
		}
	}
	if r.Completion != "" {
		if _, err := kernel.ParsePointer(r.Completion); err != nil {
			return fmt.Errorf("recovery.completion: %w", err)
		}
	}
	if r.QueryURL != "" {
		if !strings.Contains(r.QueryURL, "{idempotency_key}") {
			return errors.New("recovery.query_url must contain {idempotency_key}: a query must name the attempt it asks about")
		}
		if err := cp.HTTP.validURL(strings.ReplaceAll(r.QueryURL, "{idempotency_key}", "k")); err != nil {
			return fmt.Errorf("recovery.query_url: %w", err)
		}
	}
	for _, u := range r.FallbackQueryURLs {
		if r.QueryURL == "" || !strings.Contains(u, "{idempotency_key}") {
			return errors.New("recovery.fallback_query_urls: each must contain {idempotency_key}, beside a query_url")
		}
		if err := cp.HTTP.validURL(strings.ReplaceAll(u, "{idempotency_key}", "k")); err != nil {
			return fmt.Errorf("recovery.fallback_query_urls: %w", err)
		}
	}
	for _, s := range r.NotAppliedStatuses {
		if s < 400 || s > 599 {
			return fmt.Errorf("recovery.not_applied_statuses: %d is not a 4xx/5xx status", s)
		}
	}
	return nil
}

// providerMethods are the methods a provider may be called with.
var providerMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet}

// reservedHeaders are set by the transport or the adapter itself.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection", "Traceparent", "Tracestate"}

func (h *HTTPConfig) validate() error {
	if h.URL == "" {
		return errors.New("http.url is required for the http adapter")
	}
	if err := h.validURL(h.URL); err != nil {
		return fmt.Errorf("http.url: %w", err)
	}
	if !slices.Contains(providerMethods, h.Method) {
		return fmt.Errorf("http.method must be one of %s, not %q", strings.Join(providerMethods, ", "), h.Method)
	}
	if err := checkProviderTimeout("http.timeout", h.Timeout.Duration); err != nil {
		return err
	}
	if err := validHeaderName(h.IdempotencyHeader); err != nil {
		return fmt.Errorf("http.idempotency_header: %w", err)
	}
	for _, u := range h.FallbackURLs {
		if err := h.validURL(u); err != nil {
			return fmt.Errorf("http.fallback_urls: %w", err)
		}
	}
	c, err := LoadTLS(h.CAFile, h.CertFile, h.KeyFile)
	if err != nil {
		return fmt.Errorf("http.%s", strings.NewReplacer("tls_ca_file", "ca_file", "tls_cert_file", "cert_file", "tls_key_file", "key_file").Replace(err.Error()))
	}
	h.tls = c
	h.headers = http.Header{}
	for _, hc := range h.Headers {
		if err := validHeaderName(hc.Name); err != nil {
			return fmt.Errorf("http.headers: %w", err)
		}
		if strings.EqualFold(hc.Name, h.IdempotencyHeader) || h.headers.Get(hc.Name) != "" {
			return fmt.Errorf("http.headers: %s is set twice", hc.Name)
		}
		v, err := hc.value()
		if err != nil {
			return fmt.Errorf("http.headers %s: %w", hc.Name, err)
		}
		h.headers.Set(hc.Name, v)
	}
	return nil
}

// value reads a header's value from its file or environment variable.
func (hc HeaderConfig) value() (string, error) {
	var v string
	switch {
	case (hc.ValueFile == "") == (hc.ValueEnv == ""):
		return "", errors.New("exactly one of value_file and value_env is required (a value is never written in the configuration)")
	case hc.ValueFile != "":
		b, err := os.ReadFile(hc.ValueFile)
		if err != nil {
			return "", err
		}
		v = strings.TrimRight(string(b), "\r\n")
	default:
		var ok bool
		if v, ok = os.LookupEnv(hc.ValueEnv); !ok {
			return "", fmt.Errorf("environment variable %s is not set", hc.ValueEnv)
		}
	}
	v = hc.Prefix + v
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return "", errors.New("the value is empty or holds a line break")
	}
	return v, nil
}

// validURL checks a provider URL (checkEndpoint): plain http only to a
// loopback host unless http.allow_http says otherwise.
func (h *HTTPConfig) validURL(s string) error {
	if err := checkEndpoint(s, h.AllowHTTP); err != nil {
		if !h.AllowHTTP && strings.Contains(err.Error(), "plain http") {
			return fmt.Errorf("%w (or say http.allow_http = true)", err)
		}
		return err
	}
	return nil
}

// isZero reports whether no [capabilities.http] key was given.
func (h *HTTPConfig) isZero() bool { return reflect.ValueOf(*h).IsZero() }

// validHeaderName checks an HTTP field name (an RFC 9110 token) that the
// adapter may set.
func validHeaderName(s string) error {
	if s == "" {
		return errors.New("a header name is required")
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return fmt.Errorf("%q is not a valid header name", s)
		}
	}
	for _, r := range reservedHeaders {
		if strings.EqualFold(s, r) {
			return fmt.Errorf("%s is set by the transport, not by configuration", r)
		}
	}
	return nil
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
