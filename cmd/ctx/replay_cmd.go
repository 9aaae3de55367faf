package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/verifier"
	"github.com/spf13/cobra"
)

func init() { register(newReplayCmd) }

func newReplayCmd() *cobra.Command {
	var eventsPath, entriesPath, comparePath, keysPath, packetPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay --events events.jsonl [--compare view.json] [--keys keys.json] | --packet packet.json [--keys keys.json]",
		Short: "Recompute every resource's balances offline from exported events",
		Long: `Fold the exported events through the same kernel the runtime uses and print
every resource ledger's limit, committed, held and available. With --keys every
event's signature is checked first. With --compare the result is diffed against an
exported view.json (ctx exposure-export): exit 1 on any difference.

--entries replays a verified audit export (entries.json) instead of events.jsonl: its
records also sign each event's stream sequence and subject. With --entries, --keys
is required and the export is verified before it is replayed. No network is used.

--packet re-runs one decision offline from its replay packet (ctx decisions
packet): every signed event in it is verified (with --keys, also against those
trusted keys), the kernel's proposal step runs over the states they fold to, and
the result is compared with the signed decision record. Exit 0 when it reaches
the same decision; exit 1 naming the first stage and field that differ, or when
the packet is refused (a changed event, an unknown key).`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&eventsPath, "events", "", "events.jsonl to replay (from ctx events export)")
	f.StringVar(&entriesPath, "entries", "", "entries.json to replay instead (from ctx audit export)")
	f.StringVar(&comparePath, "compare", "", "view.json to compare with (from ctx exposure-export)")
	f.StringVar(&keysPath, "keys", "", "trusted keys.json: verify every signature")
	f.BoolVar(&asJSON, "json", false, "print the recomputed view as JSON (view.json form)")
	f.StringVar(&packetPath, "packet", "", "packet.json to replay one decision from (from ctx decisions packet)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if packetPath != "" {
			if eventsPath != "" || entriesPath != "" || comparePath != "" {
				return usageError("--packet takes only --keys and --json")
			}
			return replayPacket(packetPath, keysPath, asJSON)
		}
		if (eventsPath == "") == (entriesPath == "") {
			return usageError("exactly one of --events and --entries is required")
		}
		if entriesPath != "" && keysPath == "" {
			return usageError("--entries needs --keys")
		}
		var keys *audit.Keys
		if keysPath != "" {
			k, err := auditReadKeys(keysPath)
			if err != nil {
				return err
			}
			keys = &k
		}
		var view exposure.View
		var err error
		if eventsPath != "" {
			view, err = replayEvents(eventsPath, keys)
		} else {
			view, err = replayEntries(entriesPath, *keys)
		}
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if asJSON {
			b, err := exposure.MarshalView(view)
			if err != nil {
				return err
			}
			if _, err := os.Stdout.Write(b); err != nil {
				return err
			}
		} else {
			replayTable(view)
		}
		if comparePath == "" {
			return nil
		}
		want, err := readFileAs(comparePath, exposure.ParseView)
		if err != nil {
			return err
		}
		diffs := verifier.Compare(view, want)
		if len(diffs) == 0 {
			if !asJSON {
				fmt.Printf("equal to %s\n", comparePath)
			}
			return nil
		}
		lines := make([]string, len(diffs))
		for i, d := range diffs {
			lines[i] = "  " + d.String()
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("%d differences from %s (got = replay, want = view):\n%s", len(diffs), comparePath, strings.Join(lines, "\n"))}
	}
	return cmd
}

func replayEvents(path string, keys *audit.Keys) (exposure.View, error) {
	fh, err := os.Open(path)
	if err != nil {
		return exposure.View{}, err
	}
	defer fh.Close()
	var ring codec.Keyring
	if keys != nil {
		ring = keys.Keyring
	}
	var r io.Reader = fh
	if auditIsTerminal(os.Stderr) {
		if fi, err := fh.Stat(); err == nil {
			pr := &replayProgress{r: fh, total: fi.Size()}
			defer pr.done()
			r = pr
		}
	}
	return verifier.Replay(bufio.NewReaderSize(r, 1<<20), ring)
}

// replayProgress reports how much of a file was read, on stderr.
type replayProgress struct {
	r           io.Reader
	read, total int64
	shown       int64
}

func (p *replayProgress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.read += int64(n)
	if p.read-p.shown >= 4<<20 || (err == io.EOF && p.shown != p.read) {
		p.shown = p.read
		fmt.Fprintf(os.Stderr, "\rreplay: %d/%d MiB", p.read>>20, p.total>>20)
	}
	return n, err
}

func (p *replayProgress) done() {
	if p.shown > 0 {
		fmt.Fprintln(os.Stderr)
	}
}

func replayEntries(path string, keys audit.Keys) (exposure.View, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return exposure.View{}, err
	}
	res, err := verifier.VerifyEntries(b, keys)
	if err != nil {
		return exposure.View{}, fmt.Errorf("%s: %w", path, err)
	}
	if !res.OK() {
		return exposure.View{}, fmt.Errorf("%s does not verify: %v", path, res.Failure)
	}
	e, err := audit.ParseEntries(b)
	if err != nil {
		return exposure.View{}, err
	}
	return verifier.ReplayEntries(e)
}

func replayTable(v exposure.View) {
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "GUARANTEE\tRESOURCE\tLIMIT\tCOMMITTED\tHELD\tAVAILABLE\tOPEN\tRECEIPTS")
	for _, r := range v.Resources {
		g, res := r.GuaranteeID, fmt.Sprintf("%q", r.Resource)
		if g == "" {
			g, res = "-", "("+r.Subject+", tombstones only)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", g, res, r.Limit, r.Committed, r.Held, r.Available, len(r.OpenAttempts), r.Receipts)
	}
	_ = w.Flush()
	fmt.Printf("%d resources, %d incidents, tenant %q, through seq %d\n", len(v.Resources), len(v.Incidents), v.Tenant, v.Seq)
}
