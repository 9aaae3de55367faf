package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/contextos/ledger/client"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// The exit codes.
const (
	exitOK          = 0
	exitRefused     = 1
	exitUsage       = 2
	exitUnreachable = 3
)

// ExitError carries an exit code out of a command. Commands return it for
// refusals and invalid input (1) and usage errors (2).
type ExitError struct {
	Code int
	Err  error
}

// Error implements error.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks a usage problem (exit 2).
func usageError(format string, args ...any) error {
	return &ExitError{Code: exitUsage, Err: fmt.Errorf(format, args...)}
}

// commands is filled by each command file's init, so that adding a command
// never edits this file.
var commands []func() *cobra.Command

func register(f func() *cobra.Command) { commands = append(commands, f) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "ctx",
		Short: "Operate, audit and replay the ContextOS ledger",
		Long: `ctx operates, audits and replays the ContextOS ledger.

Connection: --nats, --tenant, --user and one credential (--password, --nkey or
--creds), each defaulting to its CTX_* variable (CTX_NATS, CTX_TENANT, CTX_USER,
CTX_PASSWORD, CTX_NKEY, CTX_CREDS), or a NATS context (--context or
CTX_CONTEXT) whose user is <tenant>.<principal>. Output: -o table, wide or json
(CTX_OUTPUT).

Exit codes, whatever the output format: 0 ok, 1 refused or invalid,
2 usage, 3 contextosd unreachable.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("ctx {{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: exitUsage, Err: fmt.Errorf("%w\n\n%s", err, c.UsageString())}
	})
	for _, f := range commands {
		root.AddCommand(f())
	}
	return root
}

// version is the module version and VCS revision the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	if when != "" {
		v += " " + when
	}
	return v + " " + bi.GoVersion
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int { return runIO(args, os.Stdout, os.Stderr) }

// runIO runs ctx with args, printing to out and errOut, and returns the
// exit code.
func runIO(args []string, out, errOut io.Writer) int {
	stdout = out
	defer func() { stdout = os.Stdout }()
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(errOut, "ctx:", scrub(message(err), args))
	return exitCode(err)
}

// exitCode applies the one exit-code rule.
func exitCode(err error) int {
	var ee *ExitError
	var u client.Unreachable
	var ur client.Unresolved
	var r client.Refused
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &u), errors.As(err, &ur),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrConnectionClosed):
		return exitUnreachable
	case errors.As(err, &r):
		return exitRefused
	case isUsage(err):
		return exitUsage
	}
	return exitRefused
}

// wireNames maps the request members a daemon's reason may name to the
// flags that set them, so that an error names what the operator typed.
var wireNames = strings.NewReplacer("parent_run_id", "--parent", "attempt_id", "--attempt", "guarantee_id", "--guarantee",
	"artifact_ref", "--artifact", "action_digest", "--digest", "expires_in", "--expires", "run_id", "--run",
	"capability_id", "--capability", "old_size", "--old-size", "event_id", "--event", "approval_id", "--approval")

// message is what ctx prints for err: a refusal's reason in terms of flags.
func message(err error) string {
	var r client.Refused
	if errors.As(err, &r) && r.Decision == nil {
		return "refused " + string(r.Code) + ": " + wireNames.Replace(r.Reason)
	}
	return err.Error()
}

// scrub removes any secret ctx was given from a message: the password of
// --password or $CTX_PASSWORD never reaches the terminal.
func scrub(msg string, args []string) string {
	var secrets []string
	if v := os.Getenv("CTX_PASSWORD"); v != "" {
		secrets = append(secrets, v)
	}
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--password="); ok && v != "" {
			secrets = append(secrets, v)
		} else if a == "--password" && i+1 < len(args) && args[i+1] != "" {
			secrets = append(secrets, args[i+1])
		}
	}
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "***")
	}
	return msg
}

// isUsage recognizes cobra's own usage errors (unknown command, bad args),
// which it returns as plain errors.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "required flag", "invalid argument", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
