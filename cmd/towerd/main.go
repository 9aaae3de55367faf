package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/contextos/ledger/console/tower"
	"github.com/contextos/ledger/wire"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("towerd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "the tower's TOML configuration")
	once := fs.Bool("once", false, "read and verify every log, print the fleet table and exit")
	engage := fs.String("engage", "", "engage the kill switch of every configured runtime, with this reason")
	release := fs.String("release", "", "release the kill switch of every configured runtime, with this reason")
	guardrail := fs.String("guardrail", "", "publish (set, or with --remove remove) this guardrail on every configured runtime")
	capability := fs.String("capability", "", "the capability the --guardrail covers")
	maxAmount := fs.Int64("max-amount", 0, "the --guardrail's cap per proposal")
	disabled := fs.Bool("disabled", false, "the --guardrail disables its capability")
	remove := fs.Bool("remove", false, "remove the --guardrail")
	waiver := fs.String("waiver", "", "grant this waiver on every configured runtime (with --of, --run or --resource, --for and --reason)")
	of := fs.String("of", "", "the guardrail the --waiver waives")
	runID := fs.String("run", "", "the run the --waiver lets through")
	resource := fs.String("resource", "", "the resource the --waiver lets through")
	lasts := fs.Duration("for", 0, "how long the --waiver lasts (at most 168h)")
	reason := fs.String("reason", "", "why, for the record (--guardrail, --waiver)")
	every := fs.Duration("refresh", 30*time.Second, "how old a log's reading may be before the web page reads it again through the operator's connection (0: only on request)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	modes := 0
	for _, on := range []bool{*once, *engage != "", *release != "", *guardrail != "", *waiver != ""} {
		if on {
			modes++
		}
	}
	if *config == "" || fs.NArg() > 0 || modes > 1 {
		fmt.Fprintln(stderr, "usage: towerd --config FILE [--once | --engage REASON | --release REASON | --guardrail ID ... | --waiver ID ...]")
		return 2
	}
	var control func(t *tower.Tower) []tower.Ack
	switch {
	case *guardrail != "":
		req := wire.GuardrailRequest{GuardrailID: *guardrail, CapabilityID: *capability, Disabled: *disabled, MaxAmount: *maxAmount, Remove: *remove, Reason: *reason}
		if *remove == (*capability != "") || (!*remove && *disabled == (*maxAmount != 0)) {
			fmt.Fprintln(stderr, "usage: towerd --config FILE --guardrail ID (--capability C (--disabled | --max-amount N) | --remove) [--reason WHY]")
			return 2
		}
		control = func(t *tower.Tower) []tower.Ack { return t.Guardrail(context.Background(), req) }
	case *waiver != "":
		if *of == "" || (*runID == "") == (*resource == "") || *lasts <= 0 || *reason == "" {
			fmt.Fprintln(stderr, "usage: towerd --config FILE --waiver ID --of GUARDRAIL (--run R | --resource X) --for D --reason WHY")
			return 2
		}
		req := wire.WaiverRequest{WaiverID: *waiver, GuardrailID: *of, RunID: *runID, Resource: *resource,
			Until: time.Now().Add(*lasts).UTC().Format(time.RFC3339), Reason: *reason}
		control = func(t *tower.Tower) []tower.Ack { return t.Waiver(context.Background(), req) }
	}
	cfg, err := tower.LoadConfig(*config)
	if err != nil {
		fmt.Fprintln(stderr, "towerd:", err)
		return 1
	}
	t := tower.New(cfg)
	ctx := context.Background()
	switch {
	case control != nil:
		acks := control(t)
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "RUNTIME\tTENANT\tRECORDED\tSENT AS\tPROBLEM")
		code := 0
		for _, a := range acks {
			fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", a.Runtime, a.Tenant, a.Acknowledged, a.Operator, a.Error)
			if !a.Acknowledged {
				code = 1
			}
		}
		w.Flush()
		return code
	case *engage != "" || *release != "":
		on, reason := *engage != "", *engage+*release
		acks := t.KillSwitch(ctx, on, reason)
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "RUNTIME\tTENANT\tACKNOWLEDGED\tSTATE\tPROBLEM")
		code := 0
		for _, a := range acks {
			state := map[bool]string{true: "engaged", false: "released"}[a.Engaged]
			fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", a.Runtime, a.Tenant, a.Acknowledged, state, a.Error)
			if !a.Acknowledged {
				code = 1
			}
		}
		w.Flush()
		return code
	case *once:
		f := t.Refresh(ctx)
		printFleet(stdout, f)
		if !f.OK() {
			return 1
		}
		return 0
	}
	srv, err := t.Serve(*every)
	if err != nil {
		fmt.Fprintln(stderr, "towerd:", err)
		return 1
	}
	fmt.Fprintln(stderr, "towerd: serving", srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	srv.Close()
	return 0
}

func printFleet(out io.Writer, f *tower.Fleet) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUNTIME\tTENANT\tCHAIN\tRECORDS\tCHECKPOINTED\tOPEN HOLDS\tINCIDENTS\tAPPROVALS\tKILL SWITCH")
	for _, l := range f.Logs {
		chain := "verified"
		switch {
		case l.Error != "":
			chain = "unreadable: " + l.Error
		case l.Forked:
			chain = "FORK/REWRITTEN: " + l.Failure
		case !l.Verified:
			chain = "NOT VERIFIED: " + l.Failure
		}
		kill := ""
		if k := l.Kill; k != nil {
			kill = map[bool]string{true: "engaged", false: "released"}[k.Engaged] + " by " + k.Operator
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d/%d\t%s\n", l.Runtime, l.Tenant, chain, l.Records, l.CheckpointSize, l.OpenAttempts,
			len(l.Incidents)+l.MoreIncidents, l.ApprovalsGranted, l.ApprovalsRedeemed, kill)
	}
	w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUNTIME\tTENANT\tGUARANTEE\tRESOURCE\tLIMIT\tCOMMITTED\tHELD\tAVAILABLE")
	for _, l := range f.Logs {
		for _, r := range l.Resources {
			fmt.Fprintf(w, "%s\t%s\t%s\t%q\t%d\t%d\t%d\t%d\n", l.Runtime, l.Tenant, r.GuaranteeID, r.Resource, r.Limit, r.Committed, r.Held, r.Available)
		}
		if l.MoreResources > 0 {
			fmt.Fprintf(w, "%s\t%s\t(%d more)\t\t\t\t\t\n", l.Runtime, l.Tenant, l.MoreResources)
		}
	}
	w.Flush()
	printReview(out, f)
}

// printReview prints what waits on an operator or constrains the agents,
// from the verified logs: the two-person requests waiting for a second
// operator, the guardrails and the waivers in force. A table with no row
// is left out.
func printReview(out io.Writer, f *tower.Fleet) {
	table := func(header string, rows func(w io.Writer) int) {
		var b bytes.Buffer
		w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, header)
		if rows(w) == 0 {
			return
		}
		w.Flush()
		fmt.Fprintln(out)
		_, _ = out.Write(b.Bytes())
	}
	table("RUNTIME\tTENANT\tREQUEST\tVERB\tASKED BY\tCONFIRMER NEEDS\tREQUESTED\tEXPIRES\tBODY", func(w io.Writer) int {
		n := 0
		for _, l := range f.Logs {
			for _, r := range l.Requests {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%q\n", l.Runtime, l.Tenant, r.RequestID, r.Verb, r.Operator, r.Scope, r.RequestedAt, cmp.Or(r.ExpiresAt, "never"), r.Body)
				n++
			}
			if l.MoreRequests > 0 {
				fmt.Fprintf(w, "%s\t%s\t(%d more)\t\t\t\t\t\t\n", l.Runtime, l.Tenant, l.MoreRequests)
			}
		}
		return n
	})
	table("RUNTIME\tTENANT\tGUARDRAIL\tCAPABILITY\tRULE\tSET BY\tAT\tREASON", func(w io.Writer) int {
		n := 0
		for _, l := range f.Logs {
			for _, g := range l.Guardrails {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%q\n", l.Runtime, l.Tenant, g.GuardrailID, g.CapabilityID, g.Rule(), g.Operator, g.At, g.Reason)
				n++
			}
		}
		return n
	})
	table("RUNTIME\tTENANT\tWAIVER\tOF GUARDRAIL\tFOR\tUNTIL\tGRANTED BY\tREASON", func(w io.Writer) int {
		n := 0
		for _, l := range f.Logs {
			for _, v := range l.Waivers {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%q\t%s\t%s\t%q\n", l.Runtime, l.Tenant, v.WaiverID, v.GuardrailID, v.For(), v.Until.UTC().Format(time.RFC3339), v.Operator, v.Reason)
				n++
			}
		}
		return n
	})
}
