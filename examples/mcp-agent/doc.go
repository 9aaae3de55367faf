// Command mcp-agent tells the seed story over MCP with real processes and no
// model key: contextosd serves the refund capability as an MCP tool, two
// scripted MCP clients (the Go SDK's, each with its own bearer token) race
// INR 800 refunds against an INR 1,000 ceiling, and the capability's
// provider is a tool of another MCP server (the Go SDK's, in this process).
// A pending refund and a broken transport are then settled by the operator
// with ctx reconcile. It checks every balance and the provider's call
// counts and exits non-zero if anything differs.
package main
