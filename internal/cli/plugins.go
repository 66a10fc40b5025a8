package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/plugin"
	"github.com/agentd-dev/agentd/protocol"
)

// addPluginFlag adds --plugin, repeatable, to a command that creates or
// continues a session.
func addPluginFlag(fl *pflag.FlagSet, dirs *[]string) {
	fl.StringArrayVar(dirs, "plugin", nil, "a plugin package's directory, in Claude Code's layout (.claude-plugin/plugin.json, commands/, skills/, .mcp.json); repeat for several. The session keeps them: its workers load them at every start, on this host or the next")
}

// pluginDirs returns the directories of --plugin, absolute and clean, as
// a session records them.
func pluginDirs(dirs []string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d == "" {
			return nil, usagef("--plugin \"\": want a plugin package's directory")
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, usagef("--plugin %q: %v", d, err)
		}
		out = append(out, abs)
	}
	if err := protocol.ValidPluginDirs("--plugin", out); err != nil {
		return nil, usageError{err}
	}
	return out, nil
}

// expandCommand returns the prompt a line typed as "/name args" becomes,
// from the session's plugin packages; a line that is no command (it does
// not start with a slash and a name) is the prompt as it is.
func expandCommand(ctx context.Context, c *client.Conn, session, line string) (string, error) {
	name, args, ok := plugin.ParseInvocation(line)
	if !ok {
		return line, nil
	}
	res, err := client.Call(ctx, c, protocol.OpSessionCommandExpand, protocol.CommandExpandInput{SessionID: session, Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	return res.Prompt, nil
}

func newPluginsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plugins SESSION",
		Short: "List a session's plugin packages, with their prompt commands and skills.",
		Long: `List a session's plugin packages, with their prompt commands and skills.

A session gets its packages from agentd new --plugin DIR or agentd run
--plugin DIR and keeps them: each of its workers loads them at its start.
A command is typed as /name (or /package:name when two packages have one
of that name) in agentd attach or as the prompt of agentd run.`,
		Args: exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				res, err := client.Call(ctx, l.conn, protocol.OpSessionCommands, protocol.SessionRef{SessionID: l.session.SessionID})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, res)
				}
				printPlugins(e, res)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the packages, commands and skills as JSON")
	return cmd
}

func printPlugins(e *env, res protocol.SessionCommandsResult) {
	if len(res.Packages) == 0 {
		fmt.Fprintln(e.stdout, "no plugin packages: add some with agentd run --plugin DIR")
		return
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PACKAGE\tVERSION\tDIRECTORY\tLOADED")
	for _, p := range res.Packages {
		name, loaded := p.Name, fmt.Sprintf("%d×", p.Activations)
		if p.Error != "" {
			name, loaded = "-", "failed: "+p.Error
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, dash(p.Version), p.Dir, loaded)
	}
	w.Flush()
	if len(res.Commands) > 0 {
		fmt.Fprintln(e.stdout, "\ncommands:")
		w = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		for _, c := range res.Commands {
			fmt.Fprintf(w, "  /%s %s\t%s\n", c.Name, c.ArgumentHint, c.Description)
		}
		w.Flush()
	}
	if len(res.Skills) > 0 {
		fmt.Fprintln(e.stdout, "\nskills:")
		w = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		for _, k := range res.Skills {
			fmt.Fprintf(w, "  %s\t%s\n", k.Name, k.Description)
		}
		w.Flush()
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
