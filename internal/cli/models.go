package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

func newModelsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the configured providers' models, or select one.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				var res protocol.ModelsListResult
				if err := c.Request(ctx, protocol.OpModelsList, nil, &res); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, res)
				}
				for _, m := range res.Models {
					mark := " "
					if res.Default != nil && *res.Default == m {
						mark = "*"
					}
					fmt.Fprintf(e.stdout, "%s %s/%s\n", mark, m.Provider, m.ModelID)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the models as JSON")
	var session string
	sel := &cobra.Command{
		Use:   "select PROVIDER/MODEL",
		Short: "Select the model of a session (--session) or of new sessions.",
		Args:  exactArgs(1, "PROVIDER/MODEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				var res protocol.ModelSelection
				if err := c.Request(ctx, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: session, Model: args[0]}, &res); err != nil {
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
				var res protocol.ModelSelection
				if err := c.Request(ctx, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: thinkingSession, Level: args[0]}, &res); err != nil {
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
