// Package cli is the agentd command: the host daemon and the client
// commands, over the public client package. It owns flags, output and exit
// codes, and nothing of the protocol's behaviour.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks a command line the user got wrong.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// env is what every command writes to and reads from.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// Main runs the agentd command with args and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(e)
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "agentd: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentd",
		Short:         "agentd hosts coding-agent sessions that outlive their clients.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q: see agentd --help", args[0])
			}
			return cmd.Help()
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.DisableDefaultCmd = true
	hostModel = ""
	root.PersistentFlags().StringVar(&hostModel, "host-model", "", "default model (provider/model) of a host this command starts; an error when one already runs")
	root.AddCommand(
		newStatusCmd(e),
		newHostCmd(e),
		newShutdownCmd(e),
		newVersionCmd(e),
		newRunCmd(e),
		newAttachCmd(e),
		newNewCmd(e),
		newLsCmd(e),
		newLogCmd(e),
		newStopCmd(e),
		newRenameCmd(e),
		newArchiveCmd(e),
		newRmCmd(e),
		newModelsCmd(e),
		newAnswerCmd(e),
		newWorkerCmd(e),
	)
	return root
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
