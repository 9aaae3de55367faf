// Package provider is a synthetic payment provider for tests, the demo and
// the chaos harness: a real HTTP server that issues refunds idempotently by
// the Idempotency-Key header, answers each call according to a script, and
// counts every call it receives.
package provider
