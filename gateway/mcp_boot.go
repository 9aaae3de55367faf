package gateway

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
