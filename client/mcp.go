package client

import (
	"context"

	"github.com/agentd-dev/agentd/protocol"
)

// SetSessionMCPServers adds servers to session sessionID's own MCP servers,
// each replacing the one of its name, and removes those named by remove;
// the session's other servers are kept. The session's workers run them,
// the one running now included. With neither, it changes nothing and
// returns the list. The result never holds an environment variable's or
// a header's value. Experimental.
func (c *Conn) SetSessionMCPServers(ctx context.Context, sessionID string, servers []protocol.SessionMCPServer, remove ...string) (protocol.SessionMCPSetResult, error) {
	return Call(ctx, c, protocol.OpSessionMCPSet, protocol.SessionMCPSetInput{SessionID: sessionID, Servers: servers, Remove: remove})
}
