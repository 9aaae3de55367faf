package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/contextos/ledger/internal/testing/tlsenv"
)

func main() {
	config := flag.String("config", "examples/shared-guarantees/contextos.toml", "contextosd configuration template ({{DATA}}, {{LISTEN}}, {{PROVIDER}})")
	dir := flag.String("dir", "", "directory for the CA, the credentials and the runtime's data (default: a new temporary one, removed at exit)")
	flag.Parse()
	if err := run(*config, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "tlsenv:", err)
		os.Exit(1)
	}
}

func run(config, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "contextos-tlsenv-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "runtime.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	env, err := tlsenv.Start(tlsenv.Options{Config: config, Dir: dir, Log: log})
	if err != nil {
		return err
	}
	defer env.Close()
	b, err := json.Marshal(env.Info)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	lines := make(chan string)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			lines <- in.Text()
		}
		close(lines)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case <-sig:
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			switch l {
			case "restart":
				if err := env.Restart(); err != nil {
					return err
				}
				fmt.Println("restarted")
			default:
				fmt.Fprintf(os.Stderr, "tlsenv: unknown command %q (restart, or end of input)\n", l)
			}
		}
	}
}
