package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contextos/ledger/internal/testing/chaos"
)

func main() {
	mode := flag.String("mode", "both", "single, cluster or both")
	duration := flag.Duration("duration", 60*time.Second, "load phase of each run")
	faultEvery := flag.Duration("fault-every", 3*time.Second, "mean time between faults")
	resources := flag.Int("orders", 300, "orders (resources)")
	agents := flag.Int("agents", 8, "agents")
	seed := flag.Uint64("seed", 1, "random seed")
	bin := flag.String("bin", "", "directory with prebuilt contextosd and natsd (default: build them)")
	verbose := flag.Bool("v", false, "log progress and faults")
	keep := flag.Bool("keep", false, "keep the work directory of a passing run")
	ownership := flag.Bool("ownership", false, "run the daemons with [nats.ownership] on (one owner of the tenant's partition)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var log io.Writer = io.Discard
	if *verbose {
		log = os.Stderr
	}
	modes := []chaos.Mode{chaos.Mode(*mode)}
	if *mode == "both" {
		modes = []chaos.Mode{chaos.ModeSingle, chaos.ModeCluster}
	}
	failed := false
	for _, m := range modes {
		if m != chaos.ModeSingle && m != chaos.ModeCluster {
			fmt.Fprintf(os.Stderr, "chaos: unknown mode %q\n", m)
			os.Exit(2)
		}
		res, err := chaos.Run(ctx, chaos.Options{Mode: m, Duration: *duration, FaultEvery: *faultEvery, Resources: *resources,
			Agents: *agents, Seed: *seed, Bin: *bin, Log: log, Ownership: *ownership})
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: %v\n", m, err)
			os.Exit(1)
		}
		res.Table(os.Stdout)
		if !res.OK() {
			failed = true
		} else if !*keep {
			_ = os.RemoveAll(res.Dir)
		}
	}
	if failed {
		os.Exit(1)
	}
}
