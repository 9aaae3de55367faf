package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/events/codec"
	"github.com/spf13/cobra"
)

func init() { register(newWitnessCmd) }

func newWitnessCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "Run a witness that cosigns audit checkpoints (C2SP tlog-witness)",
		Long: `A witness keeps, per log, the last checkpoint it cosigned, and cosigns a new one
only when a consistency proof shows it extends that one. A log that shrank or
was rewritten (say, its streams deleted and part of its events republished) is
then refused, and an export of it lacks the witness's cosignature:
"ctx audit-verify --witness-key K --witnesses 1" refuses it. Run a witness
where the runtime's operators cannot rewrite its state.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newWitnessInitCmd(), newWitnessServeCmd())
	return cmd
}

// witnessCosigner loads a witness key file and names it.
func witnessCosigner(keyPath, name string) (*audit.Cosigner, error) {
	key, err := codec.LoadPrivateKey(keyPath)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	c, err := audit.NewCosigner(name, key, func() uint64 { return uint64(time.Now().Unix()) })
	if err != nil {
		return nil, usageError("%v", err)
	}
	return c, nil
}

func newWitnessInitCmd() *cobra.Command {
	var keyPath, name string
	cmd := &cobra.Command{
		Use:   "init --key FILE --name NAME",
		Short: "Make a witness key (mode 0600) and print its cosignature key",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "key file to create (required; never overwritten)")
	cmd.Flags().StringVar(&name, "name", "", "the witness's name, e.g. witness.example/w1 (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if keyPath == "" || name == "" {
			return usageError("--key and --name are required")
		}
		key, err := codec.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		c, err := audit.NewCosigner(name, key, func() uint64 { return 0 })
		if err != nil {
			return usageError("%v", err)
		}
		if err := codec.SavePrivateKey(keyPath, key); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		fmt.Println(c.VerifierKey())
		return nil
	}
	return cmd
}

func newWitnessServeCmd() *cobra.Command {
	var keyPath, name, statePath, listen, logKeysPath, keyOut string
	var logKeys []string
	cmd := &cobra.Command{
		Use:   "serve --key FILE --name NAME --state FILE --log-keys keys.json [--listen 127.0.0.1:7380]",
		Short: "Serve add-checkpoint for the logs whose keys are given",
		Long: `Serve POST /add-checkpoint (C2SP tlog-witness) for the logs of --log-keys (a
keys.json: its checkpoint keys) and --log-key (a note verifier key; repeatable).
The last checkpoint cosigned per log is kept in --state, written before each
answer. It prints its cosignature key, the --witness-key of audit-verify and the
key of [[runtime.witnesses]] (also to --key-out), and the URL it listens on.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "the witness key file (ctx witness init; required)")
	cmd.Flags().StringVar(&name, "name", "", "the witness's name (required)")
	cmd.Flags().StringVar(&statePath, "state", "", "the state file (required)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7380", "address to listen on (port 0: any free port)")
	cmd.Flags().StringVar(&logKeysPath, "log-keys", "", "a keys.json whose checkpoint keys name the logs to witness")
	cmd.Flags().StringArrayVar(&logKeys, "log-key", nil, "a log's note verifier key; repeatable")
	cmd.Flags().StringVar(&keyOut, "key-out", "", "also write the cosignature key to this file")
	cmd.RunE = func(*cobra.Command, []string) error {
		if keyPath == "" || name == "" || statePath == "" {
			return usageError("--key, --name and --state are required")
		}
		if logKeysPath != "" {
			k, err := readFileAs(logKeysPath, audit.ParseKeys)
			if err != nil {
				return err
			}
			logKeys = append(logKeys, k.CheckpointKeys...)
		}
		if len(logKeys) == 0 {
			return usageError("--log-keys or --log-key is required")
		}
		c, err := witnessCosigner(keyPath, name)
		if err != nil {
			return err
		}
		w, err := witness.Open(c, logKeys, statePath)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if keyOut != "" {
			if err := auditWriteFile(keyOut, []byte(c.VerifierKey()+"\n")); err != nil {
				return err
			}
		}
		fmt.Printf("witness %s listening on http://%s\nkey %s\n", name, ln.Addr(), c.VerifierKey())
		srv := &http.Server{Handler: witness.Handler(w), ReadHeaderTimeout: 5 * time.Second}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return &ExitError{Code: 1, Err: err}
		}
		_ = os.Stdout.Sync()
		return nil
	}
	return cmd
}
