// Command race is the clients' demo: an agent on the Python client races an
// agent on the Go client for the same order's refund ceiling, against a real
// contextosd and the synthetic provider; then an agent on the TypeScript
// client meets each status (applied, pending, exceeded, kill switch), and the
// Python agent resends its operation key from a new process. It checks every
// outcome and the provider's call counts, and exits non-zero if any differs.
//
// With --frameworks it tells the framework agents' story instead
// (frameworks.go): the agents of examples/frameworks on the OpenAI Agents
// SDK, LangGraph and the MCP Python SDK, each against the same contextosd.
package main
