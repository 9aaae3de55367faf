package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/contextos/ledger/mcpgw"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func init() { register(newCapabilityCmd) }

func newCapabilityCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capability",
		Short: "Draft capability manifests",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCapabilityImportCmd())
	return cmd
}

func newCapabilityImportCmd() *cobra.Command {
	var url, tool, id, tokenFile string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "import --mcp URL --tool NAME",
		Short: "Draft a capability's manifest (TOML) from a tool of an MCP server, for an operator to review",
		Long: `import reads the tool's declared input schema and annotations from an MCP
server (streamable HTTP) and prints a [[capabilities]] table with adapter =
"mcp": the arguments schema (less the idempotency argument, which the runtime
fills with the attempt id), and effectful from the annotations (a tool that is
not read-only is effectful). The recovery contract cannot be read from a
schema: the draft names candidate completion pointers and a candidate query
tool in comments, and an effectful draft does not validate until an operator
writes the contract.

An MCP server that wants a bearer token gets the one in --token-file or
$CTX_IMPORT_TOKEN; it is never printed.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&url, "mcp", "", "the MCP server's streamable HTTP endpoint")
	f.StringVar(&tool, "tool", "", "the tool to import")
	f.StringVar(&id, "id", "", "the capability id (default <server name>.<tool>)")
	f.StringVar(&tokenFile, "token-file", "", "file holding a bearer token for the MCP server (else $CTX_IMPORT_TOKEN, if set)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the server")
	_ = cmd.MarkFlagRequired("mcp")
	_ = cmd.MarkFlagRequired("tool")
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		// No redirect is followed, with a token or without.
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		if tokenFile != "" || os.Getenv("CTX_IMPORT_TOKEN") != "" {
			token, err := mcpToken(tokenFile, "CTX_IMPORT_TOKEN")
			if err != nil {
				return err
			}
			client = mcpgw.TokenClient(token)
		}
		ctx, cancel := context.WithTimeout(c.Context(), timeout)
		defer cancel()
		draft, err := importTool(ctx, url, tool, id, client)
		if err != nil {
			return err
		}
		_, err = io.WriteString(c.OutOrStdout(), draft)
		return err
	}
	return cmd
}

// importTool drafts the manifest of one tool of the MCP server at url.
func importTool(ctx context.Context, url, name, id string, client *http.Client) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "ctx-capability-import", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return "", &ExitError{Code: 3, Err: fmt.Errorf("connect %s: %w", url, err)}
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return "", &ExitError{Code: 3, Err: fmt.Errorf("list tools of %s: %w", url, err)}
		}
		tools = append(tools, t)
	}
	i := slices.IndexFunc(tools, func(t *mcp.Tool) bool { return t.Name == name })
	if i < 0 {
		names := make([]string, len(tools))
		for j, t := range tools {
			names[j] = t.Name
		}
		return "", &ExitError{Code: 1, Err: fmt.Errorf("%s serves no tool %q (it serves %s)", url, name, strings.Join(names, ", "))}
	}
	if id == "" {
		server := "mcp"
		if r := cs.InitializeResult(); r != nil && r.ServerInfo != nil && r.ServerInfo.Name != "" {
			server = r.ServerInfo.Name
		}
		id = capabilityToken(server) + "." + capabilityToken(name)
	}
	return draftManifest(url, id, tools[i], tools)
}

// capabilityToken keeps the characters a capability id (and a tool name)
// may hold.
func capabilityToken(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// idempotencyNames are argument names taken to carry an idempotency key.
var idempotencyNames = []string{"idempotency_key", "idempotencyKey", "idempotency-key", "request_id", "requestId"}

type objectSchema struct {
	raw        map[string]any
	properties map[string]any
}

func schemaOf(v any) (objectSchema, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return objectSchema{}, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return objectSchema{}, fmt.Errorf("the input schema is not a JSON object")
	}
	props, _ := m["properties"].(map[string]any)
	return objectSchema{raw: m, properties: props}, nil
}

func (s objectSchema) idempotencyArgument() string {
	for _, n := range idempotencyNames {
		if _, ok := s.properties[n]; ok {
			return n
		}
	}
	return ""
}

// withoutArgument is the schema less one property (the runtime supplies it).
func (s objectSchema) withoutArgument(name string) map[string]any {
	out := map[string]any{}
	for k, v := range s.raw {
		out[k] = v
	}
	if name == "" {
		return out
	}
	props := map[string]any{}
	for k, v := range s.properties {
		if k != name {
			props[k] = v
		}
	}
	out["properties"] = props
	if req, ok := s.raw["required"].([]any); ok {
		var keep []any
		for _, r := range req {
			if r != name {
				keep = append(keep, r)
			}
		}
		out["required"] = keep
		if len(keep) == 0 {
			delete(out, "required")
		}
	}
	return out
}

// stringPointers are the JSON pointers of the string leaves of an output
// schema: the candidates for recovery.completion.
func stringPointers(schema any, prefix string, depth int, out *[]string) {
	m, ok := schema.(map[string]any)
	if !ok || depth > 4 {
		return
	}
	if m["type"] == "string" && prefix != "" {
		*out = append(*out, prefix)
	}
	props, _ := m["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		esc := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		stringPointers(props[k], prefix+"/"+esc, depth+1, out)
	}
}

// completionCandidate prefers a field named like a state.
func completionCandidate(ptrs []string) string {
	for _, p := range ptrs {
		last := p[strings.LastIndex(p, "/")+1:]
		if last == "status" || last == "state" {
			return p
		}
	}
	return ptrs[0]
}

func tomlString(s string) string {
	if !strings.Contains(s, "'''") && !strings.ContainsAny(s, "\r") {
		return "'''" + s + "'''"
	}
	var b bytes.Buffer
	_ = toml.NewEncoder(&b).Encode(map[string]string{"s": s})
	return strings.TrimSpace(strings.TrimPrefix(b.String(), "s = "))
}

// draftManifest writes the [[capabilities]] table of tool.
func draftManifest(url, id string, tool *mcp.Tool, all []*mcp.Tool) (string, error) {
	in, err := schemaOf(tool.InputSchema)
	if err != nil {
		return "", &ExitError{Code: 1, Err: fmt.Errorf("tool %s: %w", tool.Name, err)}
	}
	idem := in.idempotencyArgument()
	args, err := json.Marshal(in.withoutArgument(idem))
	if err != nil {
		return "", err
	}
	effectful := tool.Annotations == nil || !tool.Annotations.ReadOnlyHint
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# Drafted by `ctx capability import` from tool %q of %s.", tool.Name, url)
	p("# Review every line before it goes into the pinned manifest.")
	if tool.Description != "" {
		p("# The tool says: %s", strings.ReplaceAll(tool.Description, "\n", " "))
	}
	p("[[capabilities]]")
	p("id = %q", id)
	p(`version = "1"`)
	if effectful {
		p(`risk = "medium" # review: high requires an approval per call`)
		p("effectful = true # the tool is not annotated read-only")
	} else {
		p(`risk = "low"`)
		p("effectful = false # the tool is annotated read-only")
	}
	p(`adapter = "mcp"`)
	p("arguments_schema = %s", tomlString(string(args)))
	p("")
	p("  [capabilities.mcp]")
	p("  url = %q", url)
	p("  tool = %q", tool.Name)
	switch {
	case idem != "":
		p("  idempotency_argument = %q # the runtime passes the attempt id here", idem)
	case effectful:
		p("  # The tool declares no idempotency argument: the runtime will add")
		p(`  # "idempotency_key" (the attempt id), which the tool may ignore; a tool`)
		p("  # without idempotency can apply a retried call twice. Review.")
	}
	if effectful {
		var queries []string
		for _, t := range all {
			if t.Name == tool.Name || t.Annotations == nil || !t.Annotations.ReadOnlyHint {
				continue
			}
			if s, err := schemaOf(t.InputSchema); err == nil && s.idempotencyArgument() != "" && (idem == "" || s.idempotencyArgument() == idem) {
				queries = append(queries, t.Name)
			}
		}
		if len(queries) > 0 {
			p("  # query_tool = %q # read-only and takes the idempotency argument: a candidate for reconciliation", queries[0])
		} else {
			p("  # query_tool = \"\" # a read-only tool that looks an attempt up by its idempotency key")
		}
		p("")
		p("  [capabilities.recovery]")
		var ptrs []string
		if tool.OutputSchema != nil {
			if out, err := schemaOf(tool.OutputSchema); err == nil {
				stringPointers(out.raw, "", 0, &ptrs)
			}
		}
		if len(ptrs) > 0 {
			p("  # completion: where the tool's structured content reports the state;")
			p("  # the output schema's string fields are %s", strings.Join(ptrs, ", "))
			p("  # completion = %q", completionCandidate(ptrs))
		} else {
			p(`  # completion = "/status" # where the tool's structured content reports the state`)
		}
		p(`  # applied = ["succeeded"]`)
		p(`  # not_applied = ["failed"]`)
		p(`  # pending = ["pending"]`)
	}
	return b.String(), nil
}
