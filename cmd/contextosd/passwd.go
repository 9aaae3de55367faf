package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/contextos/ledger/config"
)

// runHashPassword is "contextosd hash-password": read a password from
// standard input (its first line) and print its bcrypt hash, for a
// principal's password key. The password never appears in the command
// line, so it stays out of the shell history and the process list.
func runHashPassword(args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("contextosd hash-password", flag.ContinueOnError)
	fs.SetOutput(errOut)
	cost := fs.Int("cost", config.DefaultBcryptCost, "the bcrypt cost (4..31): each step doubles the time a check takes")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: contextosd hash-password [--cost N] < password\n\nPrints the bcrypt hash of the password on standard input (its first line),\nfor a [[tenants.agents]] or [[tenants.operators]] password key.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	line, err := bufio.NewReaderSize(in, 1024).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Fprintln(errOut, "contextosd hash-password:", err)
		return 1
	}
	h, err := config.HashPassword([]byte(strings.TrimRight(line, "\r\n")), *cost)
	if err != nil {
		fmt.Fprintln(errOut, "contextosd hash-password:", err)
		return 1
	}
	fmt.Fprintln(out, h)
	return 0
}
