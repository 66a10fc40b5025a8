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
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentd-dev/agentd/internal/startenv"
	"github.com/agentd-dev/agentd/internal/version"
	"github.com/agentd-dev/agentd/protocol"
)

// The libraries this package imports have initialised, without TMUX
// (see startenv): it is back for the commands.
func init() { startenv.Restore() }

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
	growStack()
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	notes = stderr
	word := commandWord(args)
	root := newRoot(e, word)
	root.SetArgs(args)
	// A daemon has its signals before it serves: what stops it (a
	// supervisor's SIGTERM) then drains it, however soon it comes.
	ctx, stop := interruptible(word != "host" && word != "worker")
	defer stop()
	cmd, err := root, unknownCommand(root, args)
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil {
		return exitOK
	}
	var own exitCodeError
	if errors.As(err, &own) {
		return own.code
	}
	err = hostLacksKey(err)
	code := exitFailure
	if isUsage(cmd, err) {
		code = exitUsage
	}
	reportError(stderr, err, code, wantsJSON(cmd, args))
	return code
}

// interruptible returns a context cancelled at SIGINT or SIGTERM, and
// what to call once the command has run, as signal.NotifyContext does.
// Asking for a signal is a hand-over to the runtime's signal thread and
// back, one for each. In the background, they are asked on a goroutine
// of their own, which the command's start does not wait on: a signal
// that comes before they are asked has its default action, as one that
// comes while the runtime starts.
func interruptible(background bool) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	ask := func() { signal.Notify(sigs, os.Interrupt, syscall.SIGTERM) }
	if !background {
		ask()
	}
	var watching sync.WaitGroup
	watching.Go(func() {
		if background {
			ask()
		}
		defer signal.Stop(sigs)
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, func() {
		cancel()
		watching.Wait()
	}
}

// commands are agentd's commands by the word that runs each. A command
// line whose first word names one builds that command alone under the
// root: the whole tree, built for help, completion and a word that names
// none, is about a hundred page faults of a start (see
// docs/process-start.md), paid by every process the executable runs.
var commands = []struct {
	name  string
	build func(*env) *cobra.Command
}{
	{"status", newStatusCmd},
	{"host", newHostCmd},
	{"shutdown", newShutdownCmd},
	{"upgrade", newUpgradeCmd},
	{"version", newVersionCmd},
	{"run", newRunCmd},
	{"attach", newAttachCmd},
	{"new", newNewCmd},
	{"ls", newLsCmd},
	{"plugins", newPluginsCmd},
	{"log", newLogCmd},
	{"stop", newStopCmd},
	{"rename", newRenameCmd},
	{"archive", newArchiveCmd},
	{"unarchive", newUnarchiveCmd},
	{"rm", newRmCmd},
	{"compact", newCompactCmd},
	{"fork", newForkCmd},
	{"rewind", newRewindCmd},
	{"models", newModelsCmd},
	{"auth", newAuthCmd},
	{"answer", newAnswerCmd},
	{"ps", newPsCmd},
	{"logs", newLogsCmd},
	{"mcp", newMCPCmd},
	{"shell", newShellCmd},
	{"pty", newPtyCmd},
	{"web", newWebCmd},
	{"share", newShareCmd},
	{"worker", newWorkerCmd},
	{"acp", newACPCmd},
}

// newRoot builds the agentd command with the command named word under it,
// or, when word names none of commands, with all of them, help and the
// shell completions.
func newRoot(e *env, word string) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentd",
		Short:         "agentd hosts coding-agent sessions that outlive their clients.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Long: `agentd hosts coding-agent sessions that outlive their clients.

Without a command, on a terminal, agentd attaches to the current directory's
latest session, or starts one (agentd attach --new); off a terminal it
prints this help.`,
		Args: noArgs, // an unknown command is caught before, by unknownCommand
		RunE: func(cmd *cobra.Command, args []string) error {
			return bare(e, cmd)
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{flagError(err)} })
	root.SetVersionTemplate(fmt.Sprintf("agentd {{.Version}} (protocol %d..%d)\n", protocol.ProtocolVersion, protocol.ProtocolVersion))
	hostModel = ""
	root.PersistentFlags().StringVar(&hostModel, "host-model", "", "default model (provider/model) of a host this command starts; an error when one already runs")
	for _, c := range commands {
		if c.name == word {
			root.AddCommand(c.build(e))
			// cobra adds its completion command at every run otherwise.
			root.CompletionOptions.DisableDefaultCmd = true
			return root
		}
	}
	// Only the root takes --version (a command's help does not list it), and
	// the build's version is read from its module information.
	root.Version = version.String()
	for _, c := range commands {
		root.AddCommand(c.build(e))
	}
	// Added now rather than when the command runs, so that unknownCommand
	// finds them.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Print the help of agentd or of one of its commands.",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil {
				return usageError{err}
			}
			switch {
			case len(rest) > 0 && target.HasSubCommands():
				return noArgs(target, rest)
			case len(rest) > 0:
				return usagef("%s has no command %q", target.CommandPath(), rest[0])
			}
			return target.Help()
		},
	})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	addCompletions(root)
	root.SuggestionsMinimumDistance = 2
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		// Without a shell it prints its help; with an unknown one it is a
		// usage error, where cobra would print the help too.
		comp.Short = "Print a shell completion script: bash, zsh, fish or powershell."
		comp.Args = cobra.ArbitraryArgs
		comp.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("completion %q: want one of bash, zsh, fish or powershell", args[0])
			}
			return cmd.Help()
		}
	}
	return root
}

// unknownCommand refuses a first word that names no command, suggesting
// the commands it is close to. It runs before cobra, which would otherwise
// take `agentd nosuch --help` as a request for the root's help.
// flagError says what a flag's value should have been, in place of the
// parser's own words (strconv.ParseInt: parsing "abc": invalid syntax).
func flagError(err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return err
	}
	var want string
	switch bad.GetFlag().Value.Type() {
	case "int", "int64", "int32", "uint", "uint64", "uint32":
		want = "want a whole number"
	case "duration":
		want = "want a duration such as 90s, 5m or 1h30m"
	case "bool":
		want = "want true or false"
	case "float64", "float32":
		want = "want a number"
	default:
		return err
	}
	return fmt.Errorf("--%s %q: %s", bad.GetFlag().Name, bad.GetValue(), want)
}

func unknownCommand(root *cobra.Command, args []string) error {
	word := commandWord(args)
	if word == "" || word == cobra.ShellCompRequestCmd || word == cobra.ShellCompNoDescRequestCmd {
		return nil
	}
	if c, _, err := root.Find([]string{word}); err == nil && c != root {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", word)
	if s := root.SuggestionsFor(word); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{errors.New(msg + " (agentd --help lists the commands)")}
}

// commandWord returns the first word of args that is neither a flag nor
// a flag's value: the command's name, if args name one.
func commandWord(args []string) string {
	word := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i = len(args)
		case a == "--host-model":
			i++ // its value
		case strings.HasPrefix(a, "-"):
		default:
			word = a
			i = len(args)
		}
	}
	return word
}

// noArgs refuses positional arguments as a usage error; for a command
// with subcommands, the first is an unknown one, and the nearest is
// suggested.
func noArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case cmd.HasSubCommands():
		msg := fmt.Sprintf("unknown command %q for %s", args[0], cmd.CommandPath())
		cmd.SuggestionsMinimumDistance = 2
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return usagef("%s (%s --help lists them)", msg, cmd.CommandPath())
	}
	return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
}
