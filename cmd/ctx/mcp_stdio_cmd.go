package main

import (
	"bytes"
	"os"

	"github.com/contextos/ledger/mcpgw"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func init() { register(newMCPStdioCmd) }

func newMCPStdioCmd() *cobra.Command {
	var url, tokenFile, run string
	cmd := &cobra.Command{
		Use:   "mcp-stdio",
		Short: "Serve contextosd's MCP tools on stdin/stdout, for MCP clients that speak only stdio",
		Long: `mcp-stdio bridges an MCP client that speaks only stdio to contextosd's MCP
gateway ([mcp] listen): it lists the gateway's tools once, serves them on
stdin/stdout, and forwards every call with the agent's bearer token.

The token is read from $CTX_MCP_TOKEN, or from the file --token-file names
(whitespace around it is ignored); it is never printed. Standard output
carries only the MCP stream; diagnostics go to standard error.

With --run the gateway is asked for that run's tools (the header
Contextos-Run-Id): the exposure of the context pack version the run pinned.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&url, "url", envOr("CTX_MCP_URL", ""), "the gateway's MCP endpoint, http://<[mcp] listen>/mcp ($CTX_MCP_URL)")
	cmd.Flags().StringVar(&tokenFile, "token-file", envOr("CTX_MCP_TOKEN_FILE", ""), "file holding the agent's MCP token, instead of $CTX_MCP_TOKEN ($CTX_MCP_TOKEN_FILE)")
	cmd.Flags().StringVar(&run, "run", envOr("CTX_MCP_RUN", ""), "the run whose tools to serve ($CTX_MCP_RUN; default: the configured packs' exposure)")
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		if url == "" {
			return usageError("--url (or $CTX_MCP_URL) is required")
		}
		token, err := mcpToken(tokenFile, "CTX_MCP_TOKEN")
		if err != nil {
			return err
		}
		if err := mcpgw.Bridge(c.Context(), url, token, run, &mcp.StdioTransport{}); err != nil {
			return &ExitError{Code: 3, Err: err}
		}
		return nil
	}
	return cmd
}

// mcpToken reads a bearer token from a file, or else from an environment
// variable. Errors never quote the token.
func mcpToken(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageError("token file: %v", err)
		}
		if t := string(bytes.TrimSpace(b)); t != "" {
			return t, nil
		}
		return "", usageError("token file %s is empty", file)
	}
	if t := os.Getenv(env); t != "" {
		return t, nil
	}
	return "", usageError("no token: set $%s or --token-file", env)
}
