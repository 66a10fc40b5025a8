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
		Short: "List the models, marking the default (*) and those that cannot run, or select one.",
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

// printModels lists every model, "*" marking the default for new sessions
// and a model that cannot run saying why; then, once per provider, what to
// do about it.
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
		if m.Unavailable != "" {
			fmt.Fprintf(tw, "%s %s\tcannot run: %s has no key\n", mark, spec(m), m.Provider)
		} else {
			fmt.Fprintf(tw, "%s %s\n", mark, spec(m))
		}
	}
	if def != "" && !listed {
		// A model its provider does not list, on a server that serves any.
		fmt.Fprintf(tw, "* %s\n", def)
	}
	tw.Flush()
	for _, p := range res.Providers {
		if p.Unavailable != "" {
			fmt.Fprintf(w, "%s\n", p.Unavailable)
		}
	}
}
