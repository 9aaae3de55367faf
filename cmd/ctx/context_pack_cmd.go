package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/internal/contexteval"
	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/kernel"
	"github.com/spf13/cobra"
)

// The pack version subcommands of `ctx context`: publish, packs, promote
// (through the release gate) and rollback. The runtime's kernel decides
// each; these commands only read files, run the evaluation and send.

func newContextPublishCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "publish PACK_FILE",
		Short: "Publish a context pack version to the runtime",
		Long: `publish sends a ContextPack (JSON) to the runtime as a new version. Its id is
its digest over the canonical pack: publishing the same content again
changes nothing; other content under a published pack_id and version is
refused pack_version_conflict. Needs the limits scope.`,
		Args: cobra.ExactArgs(1),
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		b, err := os.ReadFile(args[0])
		if err != nil {
			return &ExitError{Code: exitRefused, Err: err}
		}
		p, err := kernel.ParseContextPack(b)
		if err != nil {
			return &ExitError{Code: exitRefused, Err: fmt.Errorf("%s: %w", args[0], err)}
		}
		digest, err := kernel.PackDigest(p)
		if err != nil {
			return &ExitError{Code: exitRefused, Err: err}
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			packs, recorded, err := cl.PublishPack(ctx, b)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(map[string]any{"packs": packs, "recorded": recorded, "digest": digest})
			}
			verb := "published"
			if !recorded {
				verb = "already published"
			}
			fmt.Fprintf(stdout, "%s %s@%s %s\n", verb, p.PackID, p.Version, digest)
			return nil
		})
	}
	return cmd
}

func newContextPacksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "packs [VERSION]",
		Short: "List the published pack versions, or print one version's pack",
		Long: `packs lists the tenant's published context pack versions (oldest first) and
the promoted one. With VERSION (id@version or digest) it prints that
version's pack as JSON.`,
		Args: cobra.MaximumNArgs(1),
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		spec := ""
		if len(args) == 1 {
			spec = args[0]
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			packs, pack, err := cl.PackVersions(ctx, spec)
			if err != nil {
				return err
			}
			if spec != "" {
				_, err := fmt.Fprintf(stdout, "%s\n", pack)
				return err
			}
			if c.json {
				return printJSON(packs)
			}
			for _, v := range packs.Versions {
				mark := " "
				if packs.Promoted != nil && *packs.Promoted == v {
					mark = "*"
				}
				fmt.Fprintf(stdout, "%s %s %s\n", mark, v, v.Digest)
			}
			return nil
		})
	}
	return cmd
}

func newContextPromoteCmd() *cobra.Command {
	var casesDir string
	cmd := &cobra.Command{
		Use:   "promote VERSION --cases DIR",
		Short: "Promote a pack version through the release gate",
		Long: `promote evaluates the candidate VERSION (id@version or digest) and the
promoted version on the held-out cases under --cases (as ctx context eval
--pack does), and sends both figures with the case set's digest. The
runtime's kernel promotes the candidate only when it makes no more false
closures than the promoted version and its false-abstention rate is within
the tenant's bound (release_abstention_bound_bp, default 200 basis points)
of the promoted one's; otherwise it refuses release_gate_failed. The first
promotion of a tenant has nothing to compare with. Needs the limits scope.`,
		Args: cobra.ExactArgs(1),
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&casesDir, "cases", "", "directory of held-out decision cases (required once a version is promoted)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		return c.do(func(ctx context.Context, cl *client.Client) error {
			req := client.PackPromoteRequest{Version: args[0]}
			packs, _, err := cl.PackVersions(ctx, "")
			if err != nil {
				return err
			}
			if casesDir != "" {
				eval, err := releaseEval(ctx, cl, casesDir, args[0], packs.Promoted)
				if err != nil {
					return err
				}
				if req.Eval, err = json.Marshal(eval); err != nil {
					return err
				}
			} else if packs.Promoted != nil {
				return usageError("--cases is required: %s is promoted, and a promotion over it needs an evaluation of both", packs.Promoted)
			}
			after, recorded, err := cl.PromotePack(ctx, req)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(map[string]any{"packs": after, "recorded": recorded, "eval": json.RawMessage(req.Eval)})
			}
			if !recorded {
				fmt.Fprintf(stdout, "%s is already promoted\n", args[0])
				return nil
			}
			fmt.Fprintf(stdout, "promoted %s %s\n", after.Promoted, after.Promoted.Digest)
			return nil
		})
	}
	return cmd
}

// releaseEval evaluates the candidate and the promoted version (when one
// is) on the cases under dir.
func releaseEval(ctx context.Context, cl *client.Client, dir, candidate string, promoted *client.PackRef) (kernel.ReleaseEval, error) {
	cases, err := evalcase.Load(dir)
	if err != nil {
		return kernel.ReleaseEval{}, &ExitError{Code: exitRefused, Err: err}
	}
	var ev kernel.ReleaseEval
	if ev.CasesDigest, err = casesDigest(dir, cases); err != nil {
		return kernel.ReleaseEval{}, &ExitError{Code: exitRefused, Err: err}
	}
	figures := func(spec string) (kernel.EvalFigures, error) {
		_, raw, err := cl.PackVersions(ctx, spec)
		if err != nil {
			return kernel.EvalFigures{}, err
		}
		p, err := kernel.ParseContextPack(raw)
		if err != nil {
			return kernel.EvalFigures{}, fmt.Errorf("pack %s: %w", spec, err)
		}
		d, err := kernel.PackDigest(p)
		if err != nil {
			return kernel.EvalFigures{}, err
		}
		rep, err := contexteval.Run(cases, contexteval.Options{Pack: &p})
		if err != nil {
			return kernel.EvalFigures{}, &ExitError{Code: exitRefused, Err: err}
		}
		t := rep.Total
		return kernel.EvalFigures{Digest: d, Cases: int64(t.Cases), FalseClosures: int64(t.FalseClosures), FalseAbstentions: int64(t.FalseAbstentions)}, nil
	}
	if ev.Candidate, err = figures(candidate); err != nil {
		return kernel.ReleaseEval{}, err
	}
	if promoted != nil {
		cur, err := figures(promoted.Digest)
		if err != nil {
			return kernel.ReleaseEval{}, err
		}
		ev.Current = &cur
	}
	return ev, nil
}

// casesDigest is the hex SHA-256 over the case files, in the order Load
// read them: each file's path under dir and the SHA-256 of its bytes.
func casesDigest(dir string, cases []evalcase.Case) (string, error) {
	h := sha256.New()
	for _, c := range cases {
		b, err := os.ReadFile(c.Path)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(dir, c.Path)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s\x00%x\n", filepath.ToSlash(rel), sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func newContextRollbackCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Re-promote the pack version promoted before the current one",
		Long: `rollback demotes the promoted context pack version and promotes again the one
promoted before it (it passed its own release gate then). Refused
pack_unknown when there is no earlier promotion. Needs the limits scope.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		return c.do(func(ctx context.Context, cl *client.Client) error {
			after, err := cl.RollbackPack(ctx)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(after)
			}
			fmt.Fprintf(stdout, "promoted %s %s\n", after.Promoted, after.Promoted.Digest)
			return nil
		})
	}
	return cmd
}

func newContextDiffCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Show what changed between two pack versions or two compiled contexts",
		Long: `diff compares A and B: two context packs or two compiled contexts. Each is a
JSON file (a ContextPack or a CompiledContext, told apart by its schema) or,
when no such file exists, a pack version published in the runtime
(id@version or digest). It prints the diff as JSON: items or payload blocks
added, dropped and changed, evidence newly superseded by a resolution, and
the obligations whose status changed.

Exit codes: 0 when nothing changed, 1 when something did or an input is
invalid, 2 on usage, 3 when the runtime is unreachable.`,
		Args: cobra.ExactArgs(2),
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		var raw [2][]byte
		var remote []int
		for i, a := range args {
			b, err := os.ReadFile(a)
			switch {
			case err == nil:
				raw[i] = b
			case os.IsNotExist(err):
				remote = append(remote, i)
			default:
				return &ExitError{Code: exitRefused, Err: err}
			}
		}
		run := func() error {
			var packs [2]*kernel.ContextPack
			var compiled [2]*kernel.CompiledContext
			for i := range raw {
				p, cc, err := kernel.ParseDiffInput(raw[i])
				if err != nil {
					return &ExitError{Code: exitRefused, Err: fmt.Errorf("%s: %w", args[i], err)}
				}
				packs[i], compiled[i] = p, cc
			}
			var d kernel.ContextDiff
			switch {
			case packs[0] != nil && packs[1] != nil:
				var err error
				if d, err = kernel.DiffPacks(*packs[0], *packs[1]); err != nil {
					return &ExitError{Code: exitRefused, Err: err}
				}
			case compiled[0] != nil && compiled[1] != nil:
				d = kernel.DiffCompiled(*compiled[0], *compiled[1])
			default:
				return usageError("A and B must both be packs or both compiled contexts")
			}
			if err := printJSON(d); err != nil {
				return err
			}
			if !d.Empty() {
				return &ExitError{Code: exitRefused, Err: fmt.Errorf("%s and %s differ", args[0], args[1])}
			}
			return nil
		}
		if len(remote) == 0 {
			return run()
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			for _, i := range remote {
				_, p, err := cl.PackVersions(ctx, args[i])
				if err != nil {
					return err
				}
				raw[i] = p
			}
			return run()
		})
	}
	return cmd
}
