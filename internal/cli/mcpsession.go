//go:build !agentd_client

package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/protocol"
)

// A session's own MCP servers (what an editor gives it over ACP) are
// listed, added and removed with agentd mcp ls|add|rm --session ID, through
// the host (session.mcp.set): the host records them, and the session's
// running worker starts and stops what changed.

// setSessionMCP runs session.mcp.set on the session sel names.
func setSessionMCP(ctx context.Context, sel string, in protocol.SessionMCPSetInput) (protocol.Session, protocol.SessionMCPSetResult, error) {
	l, err := locateSession(ctx, sel)
	if err != nil {
		return protocol.Session{}, protocol.SessionMCPSetResult{}, err
	}
	defer l.conn.Close()
	res, err := l.conn.SetSessionMCPServers(ctx, l.session.SessionID, in.Servers, in.Remove...)
	return l.session, res, err
}

// sessionServer is the server agentd mcp add --session gives: its command
// found on PATH when it is not a path, its values taken as they are.
func sessionServer(s mcp.Server) (protocol.SessionMCPServer, error) {
	out := protocol.SessionMCPServer{Name: s.Name, Transport: protocol.MCPTransportStdio, Command: s.Command, Args: s.Args}
	if s.URL != "" {
		out = protocol.SessionMCPServer{Name: s.Name, Transport: protocol.MCPTransportHTTP, URL: s.URL}
	}
	if out.Command != "" && !filepath.IsAbs(out.Command) {
		path, err := exec.LookPath(out.Command)
		if err != nil {
			return out, usagef("COMMAND: %v", err)
		}
		if out.Command, err = filepath.Abs(path); err != nil {
			return out, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		out.Env = append(out.Env, protocol.NameValue{Name: k, Value: s.Env[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		out.Headers = append(out.Headers, protocol.NameValue{Name: k, Value: s.Headers[k]})
	}
	if err := protocol.ValidSessionMCPServers("server", []protocol.SessionMCPServer{out}); err != nil {
		return out, usageError{err}
	}
	return out, nil
}

// sessionListing is what agentd mcp ls --session lists: the servers of the
// session's directory, user list and plugin packages, and the session's
// own in the place of any of the same name, their values left out.
func sessionListing(ctx context.Context, sel, home string) (mcpListing, error) {
	sess, res, err := setSessionMCP(ctx, sel, protocol.SessionMCPSetInput{})
	if err != nil {
		return mcpListing{}, err
	}
	conf, err := mcp.Load(sess.Cwd, home, sess.Plugins)
	if err != nil {
		return mcpListing{}, err
	}
	l := mcpListing{Project: mcp.ProjectRoot(sess.Cwd), Problems: []string{}}
	for _, p := range conf.Problems {
		l.Problems = append(l.Problems, p.Error())
	}
	own := map[string]bool{}
	for _, s := range res.Servers {
		own[s.Name] = true
		srv := mcp.Server{
			Name: s.Name, Transport: s.Transport, Command: s.Command, Args: s.Args, URL: s.URL,
			Scope: mcp.ScopeSession, Source: "session " + sess.SessionID, Trusted: true,
		}
		srv.Env, srv.Headers = namesOnly(s.Env), namesOnly(s.Headers)
		l.Servers = append(l.Servers, srv)
	}
	for _, s := range conf.Servers {
		if !own[s.Name] {
			l.Servers = append(l.Servers, s)
		}
	}
	slices.SortFunc(l.Servers, func(a, b mcp.Server) int { return strings.Compare(a.Name, b.Name) })
	return l, nil
}

// namesOnly is names as a map whose values are left out.
func namesOnly(names []string) map[string]string {
	if len(names) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, n := range names {
		m[n] = "…"
	}
	return m
}

// printSessionChange says what agentd mcp add|rm --session changed.
func printSessionChange(w io.Writer, id string, res protocol.SessionMCPSetResult) {
	switch {
	case len(res.Added) > 0:
		fmt.Fprintf(w, "added MCP server %s to session %s: its worker runs it now and at every start\n", strings.Join(res.Added, ", "), id)
	case len(res.Replaced) > 0:
		fmt.Fprintf(w, "replaced MCP server %s of session %s: its worker runs the new one now and at every start\n", strings.Join(res.Replaced, ", "), id)
	case len(res.Removed) > 0:
		fmt.Fprintf(w, "removed MCP server %s from session %s: its worker stopped it\n", strings.Join(res.Removed, ", "), id)
	default:
		fmt.Fprintf(w, "session %s has that server as it is: nothing changed\n", id)
	}
}
