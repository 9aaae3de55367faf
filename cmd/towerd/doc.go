// Command towerd is the fleet view (Tower): it reads several runtimes' audit
// logs (exported files or live through an operator), verifies each chain and
// checkpoint against trusted keys, and shows one table of exposure,
// incidents and approvals across them, with a fleet kill switch.
//
//	towerd --config tower.toml                   # serve the web page
//	towerd --config tower.toml --once            # print the table; exit 1 if a chain fails
//	towerd --config tower.toml --engage "why"    # engage every runtime's kill switch
//	towerd --config tower.toml --release "why"   # release it
//	towerd --config tower.toml --guardrail refund_cap --capability adp_payments.issue_refund --max-amount 20000 --reason "fleet cap"
//	towerd --config tower.toml --guardrail no_wires --capability bank.wire --disabled
//	towerd --config tower.toml --guardrail refund_cap --remove
//	towerd --config tower.toml --waiver w1 --of refund_cap --run run_1 --for 4h --reason INC-9
//
// The web page acts only as the operators logged into it, each tenant's
// through that operator's own connections. The command-line modes read
// live logs and send the kill switch as each tenant's configured operator
// (operator, with the password from the variable password_env): whoever
// runs them holds those passwords, and the runtimes record that operator.
//
// --guardrail and --waiver publish to every configured tenant's runtimes
// as its configured operator, who needs the guardrails scope there.
//
// Exit codes: 0 ok, 1 a chain did not verify or a runtime did not
// acknowledge (or record a guardrail or waiver), 2 usage.
package main
