package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

func newUpgradeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "upgrade",
		Short: "Replace the running host with the agentd binary now on disk, keeping every session, turn and terminal running.",
		Long: `Replace the running host with the agentd binary now on disk, keeping every session, turn and terminal running.

The new host runs this binary with the arguments the running one was started
with (its idle grace, default model and log file), and takes the home over:
the running one stops accepting, hands its workers over and exits; turns, shell runs and PTYs go on in their workers,
and attached clients reconnect by themselves and resume where they were.
With no host running there is nothing to replace: the next command starts one.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*requestTimeout)
			defer cancel()
			c, old, _, err := activation.Open(ctx, activation.OpenOptions{NoStart: true, Options: client.Options{Surface: protocol.SurfaceCLI}})
			if errors.Is(err, client.ErrNoHost) {
				fmt.Fprintln(e.stdout, "no agentd host is running: the next command starts one with this binary")
				return nil
			}
			if err != nil {
				return err
			}
			c.Close()
			act, err := activation.Resolve(activation.Options{Replace: true})
			if err != nil {
				return err
			}
			act.Command, err = replacingCommand(act, old)
			if err != nil {
				return err
			}
			info, _, err := activation.EnsureHost(ctx, act)
			if err != nil {
				return fmt.Errorf("replacing host %s (pid %d): %w", old.HostID, old.PID, err)
			}
			fmt.Fprintf(e.stdout, "host %s replaced: pid %d (%s) → pid %d (%s)\n", info.HostID, old.PID, old.Version, info.PID, info.Version)
			return nil
		},
	}
}

// replacingCommand is the command line of the host replacing old: this
// binary, with the arguments old was started with (its idle grace, default
// model, log file), so the new host serves as the old one did. A host
// whose command line cannot be read, or that logged to its terminal, is
// replaced by one started as a command starts one, logging to the home.
func replacingCommand(act activation.Options, old client.HostInfo) ([]string, error) {
	exe, err := hostExecutable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary: %w", err)
	}
	args, err := proc.Args(old.PID)
	if err != nil || len(args) < 2 || args[1] != "host" {
		args = []string{"", "host", "--idle-grace", activation.DefaultIdleGrace.String()}
		if grace, err := activation.IdleGraceFromEnv(); err == nil {
			args[3] = grace.String()
		}
	}
	args = slices.DeleteFunc(args[1:], func(a string) bool { return a == "--replace" })
	if !slices.ContainsFunc(args, func(a string) bool { return a == "--log-file" || strings.HasPrefix(a, "--log-file=") }) {
		args = append(args, "--log-file", filepath.Join(act.Home, activation.LogFileName))
	}
	return append([]string{exe}, args...), nil
}
