// Command ctx is the operator and auditor CLI of the ContextOS ledger.
//
// Exit codes: 0 ok, 1 refused or invalid, 2 usage.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// ExitError carries an exit code out of a command. Commands return it for
// refusals (1) and invalid input (2); any other error exits 1.
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
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// commands is filled by each command file's init, so that adding a command
// never edits this file.
var commands []func() *cobra.Command

func register(f func() *cobra.Command) { commands = append(commands, f) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "ctx",
		Short:         "Operate, audit and replay the ContextOS ledger",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: 2, Err: fmt.Errorf("%w\n\n%s", err, c.UsageString())}
	})
	for _, f := range commands {
		root.AddCommand(f())
	}
	return root
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "ctx:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if isUsage(err) {
		return 2
	}
	return 1
}

// isUsage recognizes cobra's own usage errors (unknown command, bad args),
// which it returns as plain errors.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "required flag", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
