package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/version"
)

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) > 1 && os.Args[1] == "keys" {
		return runKeys(os.Args[2:])
	}
	if len(os.Args) > 1 && os.Args[1] == "hash-password" {
		return runHashPassword(os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("contextosd", flag.ContinueOnError)
	configFile := fs.String("config", "", "the TOML configuration file")
	check := fs.String("check-config", "", "validate a configuration file, and check it against the event stream it would run on (the guarantees pinned there), then exit: 0 ok, 1 invalid or refused, 3 the stream could not be read")
	offline := fs.Bool("offline", false, "with --check-config: validate the file alone, without reading the event stream")
	initKey := fs.String("init-key", "", "create a new runtime signing key file (0600) for runtime.key_file, print its key id and exit; refuses to replace one")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: contextosd --config FILE | --check-config FILE [--offline] | --init-key FILE | --version | keys rotate --config FILE | hash-password < password\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Println(version.String("contextosd"))
		return 0
	}
	if *initKey != "" {
		id, err := daemon.CreateKey(*initKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "contextosd:", err)
			return 1
		}
		fmt.Println(id)
		return 0
	}
	if *check != "" {
		return checkConfig(*check, *offline)
	}
	if *configFile == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	log := config.NewLogger(cfg, os.Stderr) // runtime.log_format, runtime.log_level
	rt, err := daemon.Boot(cfg, daemon.BootOptions{Logger: log, Hooks: faultHooks()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	// Ready is said only once a signal would stop the daemon cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	log.Info("contextosd ready", "version", version.Get().Version, "executor", rt.Gateway.Executor(), "key_id", rt.Signer.KeyID)
	<-sig
	log.Info("contextosd stopping")
	rt.Close()
	return 0
}

// checkConfig validates a configuration file and, unless offline, checks it
// against the event stream it would run on, as Boot does, writing nothing.
func checkConfig(path string, offline bool) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	if offline {
		fmt.Println("configuration ok (not checked against the event stream: --offline)")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	notes, err := daemon.CheckConfig(ctx, cfg)
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "contextosd:", n)
	}
	switch {
	case errors.Is(err, daemon.ErrStreamUnreachable):
		fmt.Fprintln(os.Stderr, "contextosd: the configuration file is valid, but it was not checked against the guarantees pinned in the event stream:", err)
		return 3
	case err != nil:
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	fmt.Println("configuration ok")
	return 0
}
