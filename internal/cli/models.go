package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

func newModelsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models with their context windows and where each is known from, marking the default (*) and those that cannot run, or select one.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				res, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, res)
				}
				printModels(e.stdout, res)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the models as JSON")
	var session string
	sel := &cobra.Command{
		Use:   "select PROVIDER/MODEL",
		Short: "Select the model of new sessions, or of one session alone (--session).",
		Args:  exactArgs(1, "PROVIDER/MODEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				res, err := client.Call(ctx, c, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: session, Model: args[0]})
				if err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, res.Model)
				return nil
			})
		},
	}
	sel.Flags().StringVar(&session, "session", "", "the session whose model to set")
	var thinkingSession string
	thinking := &cobra.Command{
		Use:   "thinking LEVEL",
		Short: "Set a session's thinking level: off, low, medium or high.",
		Args:  exactArgs(1, "LEVEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if thinkingSession == "" {
				return usagef("models thinking needs --session")
			}
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				res, err := client.Call(ctx, c, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: thinkingSession, Level: args[0]})
				if err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, res.Thinking)
				return nil
			})
		},
	}
	thinking.Flags().StringVar(&thinkingSession, "session", "", "the session")
	cmd.AddCommand(sel, thinking)
	return cmd
}

// printModels lists every model with its context window and where it is
// known from (listed by its provider, or built in while no listing is
// known), "*" marking the default for new sessions and a model that cannot
// run saying why; then, once per provider, what to do about it.
func printModels(w io.Writer, res protocol.ModelsListResult) {
	spec := func(m protocol.Model) string { return m.Provider + "/" + m.ModelID }
	def := ""
	if res.Default != nil {
		def = spec(*res.Default)
	}
	tw := newTable(w)
	listed := false
	for _, m := range res.Models {
		mark := " "
		if spec(m) == def {
			mark, listed = "*", true
		}
		source := "built in"
		if m.Source == protocol.ModelSourceProvider {
			source = "listed by " + m.Provider
		}
		if m.Unavailable != "" {
			source += "; cannot run: " + m.Provider + " has no key"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\n", mark, spec(m), windowText(m.ContextWindow), source)
	}
	if def != "" && !listed {
		// A model its provider does not list, on a server that serves any.
		fmt.Fprintf(tw, "* %s\t%s\t%s\n", def, windowText(res.Default.ContextWindow), "not listed; the server decides")
	}
	tw.Flush()
	for _, p := range res.Providers {
		if p.Unavailable != "" {
			fmt.Fprintf(w, "%s\n", p.Unavailable)
		}
	}
}

// windowText writes a context window in thousands of tokens ("200k"),
// "-" when it is not known.
func windowText(tokens int) string {
	switch {
	case tokens <= 0:
		return "-"
	case tokens >= 1_000_000 && tokens%1_000_000 == 0:
		return fmt.Sprintf("%dM", tokens/1_000_000)
	case tokens >= 1000:
		return fmt.Sprintf("%dk", (tokens+500)/1000)
	}
	return fmt.Sprint(tokens)
}
