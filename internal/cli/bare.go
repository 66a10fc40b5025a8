package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/internal/tui"
)

// bare runs agentd given no command, as tmux and the coding agents do: on
// a terminal it attaches to the current directory's latest session, or
// starts one as attach --new does; off a terminal it prints the help.
func bare(e *env, root *cobra.Command) error {
	if !tui.IsTerminal(e.stdin) || !tui.IsTerminal(e.stdout) {
		return root.Help()
	}
	attach, _, err := root.Find([]string{"attach"})
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(root.Context(), requestTimeout)
	defer cancel()
	c, err := open(ctx)
	if err != nil {
		return err
	}
	here, err := sessionsOf(ctx, c, wd)
	c.Close()
	if err != nil {
		return err
	}
	var args []string
	if len(here) > 0 {
		args = []string{here[0].SessionID}
	} else if err := attach.Flags().Set("new", "true"); err != nil {
		return err
	}
	attach.SetContext(root.Context())
	return attach.RunE(attach, args)
}
