package sessions

import (
	"context"
	"sync"

	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// A session's own MCP servers (an editor's ACP mcpServers, agentd mcp add
// --session) are recorded by the host in the home (mcp.UpdateSession),
// never in the header or the transcript, since their environment and
// headers are often keys; every worker of the session reads them at its
// start, on this host or the next, and a worker that runs is told to read
// them again when they change.

// mcpFiles serialises the changes of the sessions' own servers.
type mcpFiles struct {
	mu sync.Mutex
}

// setMCP adds, replaces and removes a session's own servers by name, and
// has its running worker start and stop what changed. Servers given again
// as they were change nothing, and no worker hears of them: a second
// editor loading the session with the same list starts nothing twice.
func (s *Service) setMCP(ctx context.Context, call *server.Call, in *protocol.SessionMCPSetInput) (protocol.SessionMCPSetResult, error) {
	h, err := s.resolveLive(in.SessionID)
	if err != nil {
		return protocol.SessionMCPSetResult{}, err
	}
	change, err := s.updateMCP(h.ID, in)
	if err != nil {
		if _, ok := err.(*protocol.Error); ok {
			return protocol.SessionMCPSetResult{}, err
		}
		return protocol.SessionMCPSetResult{}, protocol.Errorf(protocol.CodeInternalFailure, "the session's MCP servers cannot be recorded: %v", err)
	}
	res := protocol.SessionMCPSetResult{
		Servers: []protocol.SessionMCPServerInfo{}, Added: nonNil(change.Added), Replaced: nonNil(change.Replaced), Removed: nonNil(change.Removed),
	}
	for i := range change.Servers {
		res.Servers = append(res.Servers, change.Servers[i].Info())
	}
	if change.Changed() && s.workerRuns(h.ID) {
		// The worker reads the servers from their file: the values do not
		// travel again.
		fwd := protocol.SessionMCPSetInput{SessionID: h.ID}
		if _, err := forward[protocol.SessionMCPSetResult](ctx, s, h, &call.Caller, call.Operation.Name, &fwd); err != nil {
			s.log.Warn("the session's worker did not take its changed MCP servers; its next worker runs them", "session", h.ID, "err", err)
		}
	}
	return res, nil
}

// updateMCP records the change of session id's own servers, unless the
// session was removed meanwhile: a remove forgets them under the same
// lock, once the catalog no longer has the session.
func (s *Service) updateMCP(id string, in *protocol.SessionMCPSetInput) (mcp.SessionChange, error) {
	s.mcpFiles.mu.Lock()
	defer s.mcpFiles.mu.Unlock()
	if _, err := s.cat.Resolve(id); err != nil {
		return mcp.SessionChange{}, catalogError(err)
	}
	return mcp.UpdateSession(s.cfg.Home, id, in.Servers, in.Remove)
}

// forgetMCP forgets a removed session's own servers.
func (s *Service) forgetMCP(id string) {
	s.mcpFiles.mu.Lock()
	defer s.mcpFiles.mu.Unlock()
	if err := mcp.RemoveSession(s.cfg.Home, id); err != nil {
		s.log.Error("the removed session's own MCP servers cannot be forgotten", "session", id, "err", err)
	}
}

// workerRuns reports whether session id has a worker, started or
// starting.
func (s *Service) workerRuns(id string) bool {
	s.mu.Lock()
	w, ok := s.workers[id]
	s.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
