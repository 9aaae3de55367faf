package main

import "github.com/spf13/cobra"

func init() { register(newCompletionCmd) }

func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script",
		Long: `completion prints a completion script for bash, zsh or fish. For example:

  source <(ctx completion bash)
  ctx completion zsh > "${fpath[1]}/_ctx"
  ctx completion fish > ~/.config/fish/completions/ctx.fish`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(stdout, true)
			case "zsh":
				return root.GenZshCompletion(stdout)
			case "fish":
				return root.GenFishCompletion(stdout, true)
			}
			return usageError("completion takes bash, zsh or fish, not %q", args[0])
		},
	}
}
