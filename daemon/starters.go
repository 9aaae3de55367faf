package daemon

import (
	"fmt"
	"log/slog"

	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/mcpgw"
)

// startMCP serves the MCP gateway on [mcp] listen, if configured: each
// surfaced capability an MCP tool whose calls go through the gateway's
// proposal path.
func (rt *Runtime) startMCP(log *slog.Logger) error {
	if rt.Config.MCP.Listen == "" {
		return nil
	}
	s, err := mcpgw.Listen(rt.Config, rt.Gateway, log)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	rt.MCPURL, rt.stopMCP = s.URL, s.Close
	return nil
}

// startConsole serves the operator console on [console] listen, if
// configured: an operator client of the runtime's NATS API.
func (rt *Runtime) startConsole() error {
	if rt.Config.Console.Listen == "" {
		return nil
	}
	tc, err := console.OperatorTLS(rt.Config)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	s, err := console.Start(console.Options{Config: rt.Config.Console, NATSURL: rt.URL, TLS: tc, Manifest: rt.Config,
		AuthFailed: func() { rt.Gateway.AuthFailed(gateway.DoorConsole) }})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	rt.ConsoleURL, rt.stopConsole = s.URL, func() error { s.Close(); return nil }
	return nil
}
