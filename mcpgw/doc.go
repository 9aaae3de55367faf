// Package mcpgw is the MCP gateway: contextosd serves each surfaced
// capability as an MCP tool over streamable HTTP on a loopback address, and
// every tool call is a governed proposal through the same proposal path as
// a NATS proposal (a Proposer: the gateway), with no rule of its own. The
// composition root (package daemon) starts it with Listen.
//
// The agent's identity is its bearer token, configured next to its NATS
// credentials ([[tenants.agents]] mcp_token): the token alone names the
// tenant and principal; nothing in a request (arguments, headers, path)
// can choose another. Browser requests from origins other than
// [mcp] allowed_origins are refused 403.
//
// The usage loop, from an MCP client:
//
//	tools/list (header Contextos-Run-Id: run_1)
//	                                  -> one tool per capability run_1's derived tool
//	                                     exposure (its pinned pack) shows, and
//	                                     context_compile
//	tools/call context_compile {"run_id": "run_1", "capability_id": "crm.lookup"}
//	                                  -> the run's compiled context (docs/context.md)
//	tools/call adp_payments.issue_refund
//	  {"run_id": "run_1", "operation_key": "refund-881",
//	   "arguments": {"order_id": "ord_881", "amount_minor": 80000}}
//	                                  -> structured content: the decision reply
//	                                     (status, balances, action_digest), or an
//	                                     error result "shared_guarantee_exceeded: ..."
//
// Bridge serves the same tools over stdio for clients that speak only
// stdio (ctx mcp-stdio). docs/mcp.md is the reference.
package mcpgw
