package sessions

import (
	"context"

	"github.com/agentd-dev/agentd/internal/plugin"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// checkPackages loads each plugin package a client names once, so that
// one that does not load is refused before a session records it, naming
// its index and the file and field at fault. The session's workers load
// them again, each for itself.
func checkPackages(dirs []string) error {
	if _, err := plugin.LoadAll("input.plugins", dirs); err != nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	return nil
}

// setPlugins records a session's plugin packages, then hands them to its
// worker, starting one if none runs: a worker started now reads them from
// the header, one that ran loads those it did not have. Once recorded,
// every later worker of the session loads them at its start, on this host
// or the next.
func (s *Service) setPlugins(ctx context.Context, call *server.Call, in *protocol.SessionPluginsSetInput) (protocol.Session, error) {
	h, err := s.resolveLive(in.SessionID)
	if err != nil {
		return protocol.Session{}, err
	}
	if err := checkPackages(in.Plugins); err != nil {
		return protocol.Session{}, err
	}
	if h, err = s.cat.SetPlugins(h.ID, in.Plugins); err != nil {
		return protocol.Session{}, catalogError(err)
	}
	fwd := *in
	fwd.SessionID = h.ID
	if _, err := forward[protocol.Session](ctx, s, h, &call.Caller, call.Operation.Name, &fwd); err != nil {
		// Recorded: the session's next worker loads them.
		s.log.Warn("the session's worker did not take its new plugin packages; its next worker loads them", "session", h.ID, "err", err)
	}
	return s.session(h), nil
}
