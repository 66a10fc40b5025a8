//go:build !agentd_client

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/protocol"
)

// EnvMCPStartTimeout bounds each MCP server's start in a worker.
const EnvMCPStartTimeout = "AGENTD_MCP_START_TIMEOUT"

func newMCPCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: shortMCP,
		Long: `A session's worker runs, at each start, the MCP servers of:
  - your own list in the home (agentd mcp add),
  - the .mcp.json files of the session's directory and its parents up to the
    repository's root, once you trust that project (agentd mcp trust),
  - the .mcp.json of the session's plugin packages,
  - the session's own servers, given by an editor over ACP or with --session.
Their tools reach the agent as mcp__<server>__<tool>; agentd ps lists the servers.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newMCPLsCmd(e), newMCPAddCmd(e), newMCPRmCmd(e), newMCPTrustCmd(e), newMCPToolsCmd(e), newMCPCallCmd(e))
	return cmd
}

// mcpListing is agentd mcp ls --json.
type mcpListing struct {
	Project  string       `json:"project"`
	Servers  []mcp.Server `json:"servers"`
	Problems []string     `json:"problems"`
}

func newMCPLsCmd(e *env) *cobra.Command {
	var asJSON bool
	var session string
	cmd := &cobra.Command{
		Use:   "ls [DIR] | ls --session ID",
		Short: "List the MCP servers a session in DIR (default: the current directory), or session ID, would run.",
		Args:  maxOneArg("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := dirArg(args)
			if err != nil {
				return err
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			var l mcpListing
			if session != "" {
				if len(args) > 0 {
					return usagef("%s takes DIR or --session, not both", cmd.CommandPath())
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
				defer cancel()
				if l, err = sessionListing(ctx, session, home); err != nil {
					return err
				}
			} else {
				conf, err := mcp.Load(dir, home, nil)
				if err != nil {
					return err
				}
				l = mcpListing{Project: mcp.ProjectRoot(dir), Servers: conf.Servers, Problems: []string{}}
				for _, p := range conf.Problems {
					l.Problems = append(l.Problems, p.Error())
				}
			}
			l.Servers = nonNil(l.Servers)
			for i := range l.Servers {
				l.Servers[i].Env = keysOnly(l.Servers[i].Env)
				l.Servers[i].Headers = keysOnly(l.Servers[i].Headers)
			}
			if asJSON {
				return writeJSON(e.stdout, l)
			}
			for _, p := range l.Problems {
				fmt.Fprintf(e.stderr, "agentd: %s\n", p)
			}
			if len(l.Servers) == 0 {
				fmt.Fprintln(e.stdout, "no MCP server: `agentd mcp add NAME -- COMMAND…` adds one, and a project's .mcp.json adds its own")
				return nil
			}
			tw := newTable(e.stdout)
			fmt.Fprintln(tw, "NAME\tSCOPE\tTRANSPORT\tRUNS\tCOMMAND")
			waiting := false
			for _, s := range l.Servers {
				runs := "yes"
				if !s.Trusted {
					runs, waiting = "untrusted", true
				}
				what := strings.Join(append([]string{s.Command}, s.Args...), " ")
				if s.Transport != mcp.TransportStdio {
					what = protocol.DisplayURL(s.URL)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(s.Name), s.Scope, s.Transport, runs, oneLine(what))
			}
			tw.Flush()
			if waiting {
				fmt.Fprintf(e.stdout, "the project's servers run once you trust it: agentd mcp trust %s\n", l.Project)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the servers as one JSON object (env and header values left out)")
	cmd.Flags().StringVar(&session, "session", "", "list the servers of this session, its own (an editor's) among them")
	return cmd
}

// keysOnly hides a map's values, which may be secrets.
func keysOnly(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = "…"
	}
	return out
}

func newMCPAddCmd(e *env) *cobra.Command {
	var envs, headers []string
	var url, session string
	var network bool
	cmd := &cobra.Command{
		Use:   "add NAME [--env K=V]… [--network] -- COMMAND [ARG…] | add NAME --url URL [--header K=V]…",
		Short: "Add an MCP server to your own list: every session's worker runs it from its next start.",
		Example: "  agentd mcp add everything -- npx -y @modelcontextprotocol/server-everything\n" +
			"  agentd mcp add github --env 'GITHUB_TOKEN=${GITHUB_TOKEN}' -- github-mcp-server stdio\n" +
			"  agentd mcp add docs --url https://example.com/mcp --header 'Authorization=Bearer ${DOCS_TOKEN}'",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s takes NAME, then -- COMMAND or --url URL", cmd.CommandPath())
			}
			takesOperands(cmd)
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s := mcp.Server{Name: args[0], URL: url, Network: network}
			if err := mcp.CheckName(s.Name); err != nil {
				return usageError{fmt.Errorf("NAME: %w", err)}
			}
			if at := cmd.ArgsLenAtDash(); at >= 0 {
				if at != 1 {
					return usagef("%s takes NAME before --", cmd.CommandPath())
				}
				if len(args) > 1 {
					s.Command, s.Args = args[1], args[2:]
				}
			} else if len(args) > 1 {
				return usagef("the server's command follows --: agentd mcp add %s -- %s", args[0], strings.Join(args[1:], " "))
			}
			switch {
			case s.Command == "" && url == "":
				return usagef("%s needs the server's command after --, or --url", cmd.CommandPath())
			case s.Command != "" && url != "":
				return usagef("--url: a server runs a command or is reached at a URL, not both")
			case url != "" && (len(envs) > 0 || network):
				return usagef("--env and --network are for a server that runs a command, and this one is reached at --url")
			case url == "" && len(headers) > 0:
				return usagef("--header is for a server reached at --url")
			}
			var err error
			if s.Env, err = pairs("--env", envs); err != nil {
				return err
			}
			if s.Headers, err = pairs("--header", headers); err != nil {
				return err
			}
			if session != "" {
				if network {
					return usagef("--network: a session's own server runs under the session's network setting")
				}
				own, err := sessionServer(s)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
				defer cancel()
				sess, res, err := setSessionMCP(ctx, session, protocol.SessionMCPSetInput{Servers: []protocol.SessionMCPServer{own}})
				if err != nil {
					return err
				}
				printSessionChange(e.stdout, sess.SessionID, res)
				return nil
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			if err := mcp.AddUser(home, s); err != nil {
				return usageError{err}
			}
			fmt.Fprintf(e.stdout, "added MCP server %s: sessions' workers run it from their next start (its tools are mcp__%s__…)\n", s.Name, s.Name)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&envs, "env", nil, "K=V added to the server's environment (${VAR} is expanded at each worker start)")
	fl.StringVar(&url, "url", "", "the server's streamable HTTP endpoint")
	fl.StringArrayVar(&headers, "header", nil, "K=V sent with each request to --url")
	fl.BoolVar(&network, "network", false, "let the server use the network when the session's sandbox has it off")
	fl.StringVar(&session, "session", "", "add it to this session's own servers (as an editor does), values taken as they are, not to your list")
	return cmd
}

// pairs reads K=V flags.
func pairs(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want K=V", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

func newMCPRmCmd(e *env) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "rm NAME [--session ID]",
		Short: "Remove an MCP server from your own list, or from a session's own servers.",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if session != "" {
				ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
				defer cancel()
				sess, res, err := setSessionMCP(ctx, session, protocol.SessionMCPSetInput{Remove: []string{args[0]}})
				if err != nil {
					return err
				}
				printSessionChange(e.stdout, sess.SessionID, res)
				return nil
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			if err := mcp.RemoveUser(home, args[0]); err != nil {
				if errors.Is(err, mcp.ErrNotListed) {
					return usagef("%v: `agentd mcp ls` lists them", err)
				}
				return err
			}
			fmt.Fprintf(e.stdout, "removed MCP server %s from your list\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "remove it from this session's own servers (those an editor gave it)")
	return cmd
}

func newMCPTrustCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "trust [DIR]",
		Short: "Trust DIR's project (default: the current directory's): its .mcp.json servers run from the next worker start.",
		Args:  maxOneArg("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := dirArg(args)
			if err != nil {
				return err
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			root, err := mcp.Trust(home, dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "trusted %s: the MCP servers of its %s files run from a session's next worker start\n", root, mcp.FileName)
			return nil
		},
	}
}

func newMCPToolsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools [SESSION]",
		Short: "List a running session's MCP servers and their tools (default: the current directory's latest session).",
		Args:  resourceSessionArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			id, c, err := sessionOfArgs(ctx, args)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := client.Call(ctx, c, protocol.OpSessionMCPList, protocol.SessionRef{SessionID: id})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, res)
			}
			if len(res.Servers) == 0 {
				fmt.Fprintf(e.stdout, "session %s has no MCP server\n", id)
				return nil
			}
			for _, s := range res.Servers {
				fmt.Fprintf(e.stdout, "%s (%s, %s) %s", s.Name, s.Scope, s.Ref, s.Status)
				if s.Detail != "" {
					fmt.Fprintf(e.stdout, ": %s", oneLine(s.Detail))
				}
				fmt.Fprintln(e.stdout)
				for _, t := range s.Tools {
					ro := ""
					if t.ReadOnly {
						ro = " (read-only)"
					}
					fmt.Fprintf(e.stdout, "  %s%s\n", t.AgentName, ro)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the servers as one JSON object")
	return cmd
}

func newMCPCallCmd(e *env) *cobra.Command {
	var session string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "call SERVER TOOL [ARGUMENTS-JSON]",
		Short:   "Call a tool of a running session's MCP server, as its agent would (default: the current directory's latest session).",
		Example: `  agentd mcp call everything get-sum '{"a": 2, "b": 3}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || len(args) > 3 {
				return usagef("%s takes SERVER TOOL [ARGUMENTS-JSON]", cmd.CommandPath())
			}
			takesOperands(cmd)
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			in := protocol.ToolCallInput{Server: args[0], Tool: args[1]}
			if len(args) == 3 {
				if !json.Valid([]byte(args[2])) {
					return usagef("ARGUMENTS-JSON: not valid JSON")
				}
				in.Arguments = json.RawMessage(args[2])
			}
			ctx := cmd.Context()
			var sargs []string
			if session != "" {
				sargs = []string{session}
			}
			id, c, err := sessionOfArgs(ctx, sargs)
			if err != nil {
				return err
			}
			defer c.Close()
			in.SessionID = id
			res, err := client.Call(ctx, c, protocol.OpSessionToolCall, in)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, res)
			}
			fmt.Fprintln(e.stdout, res.Text)
			if res.IsError {
				return exitCodeError{code: exitFailure}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session (default: the current directory's latest)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

// maxOneArg takes at most one operand, named name.
func maxOneArg(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usagef("%s takes at most one %s", cmd.CommandPath(), name)
		}
		takesOperands(cmd)
		return nil
	}
}

// dirArg is the directory operand, the current directory without one.
func dirArg(args []string) (string, error) {
	if len(args) == 1 {
		return args[0], nil
	}
	return os.Getwd()
}
