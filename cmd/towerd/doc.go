// Command towerd is the fleet view (Tower): it reads several runtimes' audit
// logs (exported files or live through an operator), verifies each chain and
// checkpoint against trusted keys, and shows one table of exposure,
// incidents and approvals across them, with a fleet kill switch.
//
//	towerd --config tower.toml                   # serve the web page
//	towerd --config tower.toml --once            # print the table; exit 1 if a chain fails
//	towerd --config tower.toml --engage "why"    # engage every runtime's kill switch
//	towerd --config tower.toml --release "why"   # release it
//
// The web page acts only as the operators logged into it, each tenant's
// through that operator's own connections. The command-line modes read
// live logs and send the kill switch as each tenant's configured operator
// (operator, with the password from the variable password_env): whoever
// runs them holds those passwords, and the runtimes record that operator.
//
// Exit codes: 0 ok, 1 a chain did not verify or a runtime did not
// acknowledge, 2 usage.
package main
