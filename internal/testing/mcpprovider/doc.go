// Package mcpprovider is a synthetic payment provider served as an MCP
// server (the official Go SDK, streamable HTTP) for tests and the MCP
// example: its issue_refund tool issues refunds idempotently by their
// idempotency_key argument and answers each call according to a script;
// get_refund looks a refund up. It counts every call.
package mcpprovider
