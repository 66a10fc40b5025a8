package worker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// The session's MCP servers: read from their configuration at each worker
// start, started in the background beside it, each a runtime resource of
// the session, their tools the agent's from the first turn that finds
// them ready. A client calls their tools through the host too
// (session.tool.call).

// startMCP reads the session's MCP configuration, its plugin packages'
// .mcp.json files and its own servers included, and starts its servers. A
// mistake in a file is logged; the servers it does not touch run.
// Packages a client adds while the worker runs bring their servers when
// the session's own servers next change, or at the worker's next start.
func (s *session) startMCP(cfg Config) *mcp.Servers {
	conf := s.loadMCP(cfg.Session.Cwd, cfg.Session.Plugins)
	nets := &networkSandbox{session: s.sandbox}
	s.closeNets = nets.close
	return mcp.Start(conf.Runnable(), mcp.Options{
		Dir: cfg.Session.Cwd, Env: s.turnEnviron(), Sandbox: nets.policy, Resources: s.res,
		StartTimeout: cfg.MCPStartTimeout, ClientName: "agentd", ClientVersion: cfg.Version, Logger: s.logger,
	})
}

// loadMCP reads the session's MCP configuration, logging its mistakes by
// file and field, never a value.
func (s *session) loadMCP(cwd string, plugins []string) *mcp.Config {
	conf, err := mcp.LoadSession(s.id, cwd, s.homeDir, plugins)
	if err != nil {
		s.logger.Error("the session's MCP servers are not started", "err", err)
		return &mcp.Config{}
	}
	for _, p := range conf.Problems {
		s.logger.Warn("an MCP configuration has a mistake; the servers it names are left out", "err", p)
	}
	for _, sv := range conf.Servers {
		if !sv.Trusted {
			s.logger.Info("a project's MCP server waits for agentd mcp trust", "server", sv.Name, "project", sv.Project)
		}
	}
	return conf
}

// mcpReloads serialises the worker's readings of its MCP configuration
// while it runs, so that an older reading never replaces a newer one.
type mcpReloads struct {
	mu sync.Mutex
}

// setMCP runs the session's MCP servers as its configuration now says:
// the host recorded a change of the session's own servers, and the worker
// reads them from their file (the input carries no values). Servers new
// or changed start, those gone stop, the others run on; a started
// server's tools reach the agent from the next turn.
func (s *session) setMCP(_ context.Context, _ *server.Call, in *protocol.SessionMCPSetInput) (protocol.SessionMCPSetResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.SessionMCPSetResult{}, err
	}
	s.reloads.mu.Lock()
	defer s.reloads.mu.Unlock()
	s.mu.Lock()
	cwd, plugins := s.header.Cwd, slices.Clone(s.header.Plugins)
	s.mu.Unlock()
	started, stopped := s.mcp.Update(s.loadMCP(cwd, plugins).Runnable())
	if len(started)+len(stopped) > 0 {
		s.logger.Info("the session's MCP servers changed", "started", started, "stopped", stopped)
	}
	return protocol.SessionMCPSetResult{Servers: []protocol.SessionMCPServerInfo{}, Added: nonNil(started), Replaced: []string{}, Removed: nonNil(stopped)}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// networkSandbox gives a stdio server the session's sandbox, or, for a
// server allowed the network when the session's commands are not, the
// same walls with the network on.
type networkSandbox struct {
	session *sandbox.Policy // constant

	mu  sync.Mutex
	net *sandbox.Policy // guarded by mu: made on first use
}

func (n *networkSandbox) policy(network bool) (*sandbox.Policy, error) {
	if !network || n.session == nil || !n.session.NetworkOff {
		return n.session, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.net == nil {
		p := n.session
		n.net = &sandbox.Policy{Mode: p.Mode, Workspace: p.Workspace, Tmp: p.Tmp, Hidden: p.Hidden, Executable: p.Executable}
	}
	return n.net, nil
}

func (n *networkSandbox) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.net.Close()
}

func (s *session) listMCP(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.MCPListResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.MCPListResult{}, err
	}
	return protocol.MCPListResult{Servers: s.mcp.List()}, nil
}

// callTool calls an MCP tool for a client. A tool's own error is a
// result with isError; a server that cannot answer fails the call.
func (s *session) callTool(ctx context.Context, _ *server.Call, in *protocol.ToolCallInput) (protocol.ToolCallResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ToolCallResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.base, cancel) // the worker stopping ends the call
	defer stop()
	res, err := s.mcp.Call(ctx, in.Server, in.Tool, in.Arguments, nil)
	switch {
	case errors.Is(err, mcp.ErrUnknownServer):
		var names []string
		for _, sv := range s.mcp.List() {
			names = append(names, sv.Name)
		}
		if len(names) == 0 {
			return protocol.ToolCallResult{}, protocol.InvalidField("input.server", "%q: the session has no MCP server (`agentd mcp ls` lists those a session would run)", in.Server)
		}
		return protocol.ToolCallResult{}, protocol.InvalidField("input.server", "%q is none of the session's MCP servers (%s): `agentd mcp tools` lists them", in.Server, strings.Join(names, ", "))
	case err != nil:
		return protocol.ToolCallResult{}, protocol.Errorf(protocol.CodeOperationUnavailable, "%v", err)
	}
	return protocol.ToolCallResult{Text: res.Text, IsError: res.IsError, Content: res.Content, StructuredContent: res.Structured}, nil
}
