package daemon

import (
	"errors"
	"fmt"
)

// errNoMCP is why a configuration with [mcp] listen cannot boot without
// the MCP gateway.
var errNoMCP = errors.New("mcp.listen is configured, but this runtime was booted without an MCP gateway (BootOptions.MCP)")

// MCPStarter starts the MCP gateway of a booted runtime (mcpgw.Start) and
// returns its endpoint URL and how to stop it.
type MCPStarter func(rt *Runtime) (url string, stop func() error, err error)

func (rt *Runtime) startMCP(start MCPStarter) error {
	if rt.Config.MCP.Listen == "" {
		return nil
	}
	if start == nil {
		return errNoMCP
	}
	u, stop, err := start(rt)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	rt.MCPURL, rt.stopMCP = u, stop
	return nil
}

// errNoConsole is why a configuration with [console] listen cannot boot
// without the console.
var errNoConsole = errors.New("console.listen is configured, but this runtime was booted without a console (BootOptions.Console)")

// ConsoleStarter starts the operator console of a booted runtime
// (console.Boot) and returns its URL and how to stop it. The console is an
// operator client of the runtime's NATS API; it lives in its own package,
// which imports this one, hence the hook.
type ConsoleStarter func(rt *Runtime) (url string, stop func() error, err error)

func (rt *Runtime) startConsole(start ConsoleStarter) error {
	if rt.Config.Console.Listen == "" {
		return nil
	}
	if start == nil {
		return errNoConsole
	}
	u, stop, err := start(rt)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	rt.ConsoleURL, rt.stopConsole = u, stop
	return nil
}
