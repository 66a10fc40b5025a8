package acp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// An editor's mcpServers (session/new, session/load, session/resume)
// become the session's own MCP servers (session.mcp.set): recorded by the
// host, run by the session's worker beside those of the user's list, the
// project and its plugin packages, kept across the session's workers and
// hosts without the editor passing them again. ACP says the list is what
// the editor wants for that session; a session agentd shares between
// editors merges by name instead: an editor's server replaces the one of
// its name, and a server an editor leaves out is kept (agentd mcp rm
// NAME --session ID removes one).

// mcpCapabilities are the transports agentd runs an editor's servers
// over, besides stdio: streamable HTTP and the 2024 SSE transport.
var mcpCapabilities = sdk.McpCapabilities{Http: true, Sse: true}

// mcpServers returns an editor's servers as the session's own, checked:
// each mistake names its field, mcpServers[i].field. No message holds an
// environment variable's or a header's value.
func mcpServers(list []sdk.McpServer) ([]protocol.SessionMCPServer, error) {
	out := make([]protocol.SessionMCPServer, 0, len(list))
	for i, m := range list {
		var s protocol.SessionMCPServer
		switch {
		case m.Stdio != nil:
			s = protocol.SessionMCPServer{Name: m.Stdio.Name, Transport: protocol.MCPTransportStdio, Command: m.Stdio.Command, Args: m.Stdio.Args}
			for _, e := range m.Stdio.Env {
				s.Env = append(s.Env, protocol.NameValue{Name: e.Name, Value: e.Value})
			}
		case m.Http != nil:
			s = protocol.SessionMCPServer{Name: m.Http.Name, Transport: protocol.MCPTransportHTTP, URL: m.Http.Url, Headers: headers(m.Http.Headers)}
		case m.Sse != nil:
			s = protocol.SessionMCPServer{Name: m.Sse.Name, Transport: protocol.MCPTransportSSE, URL: m.Sse.Url, Headers: headers(m.Sse.Headers)}
		case m.Acp != nil:
			return nil, invalidParams("mcpServers[%d]: agentd runs stdio, http and sse servers; an acp one is not offered (mcpCapabilities.acp is false)", i)
		default:
			return nil, invalidParams("mcpServers[%d]: not a server: want a stdio one (name, command, args, env) or type http or sse (name, url, headers)", i)
		}
		out = append(out, s)
	}
	if err := protocol.ValidSessionMCPServers("mcpServers", out); err != nil {
		return nil, invalidParams("%v", err)
	}
	return out, nil
}

func headers(hs []sdk.HttpHeader) []protocol.NameValue {
	var out []protocol.NameValue
	for _, h := range hs {
		out = append(out, protocol.NameValue{Name: h.Name, Value: h.Value})
	}
	return out
}

// giveMCP records an editor's servers as session id's own. The host starts
// nothing for servers it has as they are.
func (a *agent) giveMCP(ctx context.Context, id string, servers []protocol.SessionMCPServer) error {
	if len(servers) == 0 {
		return nil
	}
	if id == "" {
		return invalidParams("sessionId: must not be empty")
	}
	res, err := call(ctx, a, protocol.OpSessionMCPSet, protocol.SessionMCPSetInput{SessionID: id, Servers: servers})
	if errors.Is(err, client.ErrSessionArchived) {
		// An archived session is read, not run: it takes no servers, and
		// loading it goes on.
		a.logger.Info("an archived session takes no MCP servers", "session", id)
		return nil
	}
	if errors.Is(err, client.ErrNotFound) {
		return hostError(err) // the session, not its servers
	}
	if err != nil {
		return hostError(fmt.Errorf("mcpServers: %w", err))
	}
	if changed := len(res.Added) + len(res.Replaced); changed > 0 {
		a.logger.Info("the editor's MCP servers are the session's", "session", id, "added", res.Added, "replaced", res.Replaced)
	}
	return nil
}
