// Command contextosd is the ContextOS ledger runtime: it embeds (or joins) a
// NATS JetStream deployment and serves governed proposals and operator verbs.
//
//	contextosd --config FILE
//	contextosd --check-config FILE
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/mcpgw"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("contextosd", flag.ContinueOnError)
	config := fs.String("config", "", "the TOML configuration file")
	check := fs.String("check-config", "", "validate a configuration file and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: contextosd --config FILE | --check-config FILE\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *check != "" {
		if _, err := gateway.LoadConfig(*check); err != nil {
			fmt.Fprintln(os.Stderr, "contextosd:", err)
			return 1
		}
		fmt.Println("configuration ok")
		return 0
	}
	if *config == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	cfg, err := gateway.LoadConfig(*config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rt, err := gateway.Boot(cfg, gateway.BootOptions{Logger: log, Hooks: faultHooks(), MCP: mcpgw.Start, Console: console.Boot})
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	if rt.ConsoleURL != "" {
		log.Info("console ready", "url", rt.ConsoleURL)
	}
	if rt.MCPURL != "" {
		log.Info("mcp gateway ready", "url", rt.MCPURL)
	}
	// Ready is said only once a signal would stop the daemon cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	log.Info("contextosd ready", "nats", rt.URL, "executor", rt.Gateway.Executor(), "key_id", rt.Signer.KeyID)
	<-sig
	log.Info("contextosd stopping")
	rt.Close()
	return 0
}

// faultHooks lets the crash tests and the chaos harness kill this process
// with SIGKILL at an exact point of the dispatch sequence. It is inert
// unless CONTEXTOSD_FAULT names a point.
func faultHooks() gateway.Hooks {
	kill := func(string) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	switch os.Getenv("CONTEXTOSD_FAULT") {
	case "after-dispatch-start":
		return gateway.Hooks{AfterDispatchStart: kill}
	case "after-provider-call":
		return gateway.Hooks{AfterProviderCall: kill}
	}
	return gateway.Hooks{}
}
