package host

import (
	"context"
	"log/slog"

	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// operations returns the host's own operations, served in every state
// beside the host.* operations every server answers (a worker's too): the
// hand-off of the home to a replacing host.
func (h *Host) operations() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpHostUpgradePrepare, func(ctx context.Context, call *server.Call, _ *protocol.UpgradePrepareInput) (protocol.UpgradePrepareResult, error) {
		select {
		case <-h.Ready():
		default:
			return protocol.UpgradePrepareResult{}, protocol.Errorf(protocol.CodeHostNotReady, "the host is %s; it can hand its home over once it is ready", h.State())
		}
		if !h.CanHandOff() {
			return protocol.UpgradePrepareResult{}, protocol.Errorf(protocol.CodeOperationUnavailable, "this host cannot hand its home over")
		}
		h.Diagnostic(slog.LevelInfo, "hand-off to a replacing host requested by connection "+call.Identity.ConnectionID)
		h.HandOff()
		return protocol.UpgradePrepareResult{State: protocol.StateDraining}, nil
	})
	return t
}
