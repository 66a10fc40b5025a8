package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

func newUpgradeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "upgrade",
		Short: "Replace the running host with the agentd binary now on disk, keeping every session, turn and terminal running.",
		Long: `Replace the running host with the agentd binary now on disk, keeping every session, turn and terminal running.

The new host takes the home over: the running one stops accepting, hands its
workers over and exits; turns, shell runs and PTYs go on in their workers,
and attached clients reconnect by themselves and resume where they were.
With no host running there is nothing to replace: the next command starts one.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*requestTimeout)
			defer cancel()
			c, old, _, err := client.Open(ctx, client.OpenOptions{NoStart: true, Options: client.Options{Surface: protocol.SurfaceCLI}})
			if errors.Is(err, client.ErrNoHost) {
				fmt.Fprintln(e.stdout, "no agentd host is running: the next command starts one with this binary")
				return nil
			}
			if err != nil {
				return err
			}
			c.Close()
			opts := openOptions()
			opts.Activation.Replace = true
			c, info, _, err := client.Open(ctx, opts)
			if err != nil {
				return fmt.Errorf("replacing host %s (pid %d): %w", old.HostID, old.PID, err)
			}
			c.Close()
			fmt.Fprintf(e.stdout, "host %s replaced: pid %d (%s) → pid %d (%s)\n", info.HostID, old.PID, old.Version, info.PID, info.Version)
			return nil
		},
	}
}
