package server

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// hostHandlers returns the host.* operations, served in every state.
func (h *Server) hostHandlers() Table {
	t := Table{}
	Handle(t, protocol.OpHostStatus, func(ctx context.Context, call *Call, _ *protocol.HostStatusInput) (protocol.HostStatus, error) {
		return h.Status(), nil
	})
	Handle(t, protocol.OpHostDiagnosticsQuery, func(ctx context.Context, call *Call, in *protocol.DiagnosticsQueryInput) (protocol.DiagnosticsQueryResult, error) {
		res := h.diag.recent(in.Limit)
		if f, ok := h.composition().(Fanout); ok {
			res.Fanout = f.Fanout()
		}
		return res, nil
	})
	Handle(t, protocol.OpHostUpgradePrepare, func(ctx context.Context, call *Call, _ *protocol.UpgradePrepareInput) (protocol.UpgradePrepareResult, error) {
		comp := h.composition()
		if comp == nil {
			return protocol.UpgradePrepareResult{}, protocol.Errorf(protocol.CodeHostNotReady, "the host is %s; it can hand its home over once it is ready", h.State())
		}
		if _, ok := comp.(HandOff); !ok {
			return protocol.UpgradePrepareResult{}, protocol.Errorf(protocol.CodeOperationUnavailable, "this host cannot hand its home over")
		}
		h.diag.record(slog.LevelInfo, kindHost, "hand-off to a replacing host requested by connection "+call.Identity.ConnectionID)
		h.HandOff()
		return protocol.UpgradePrepareResult{State: protocol.StateDraining}, nil
	})
	Handle(t, protocol.OpHostShutdown, func(ctx context.Context, call *Call, _ *protocol.ShutdownInput) (protocol.ShutdownResult, error) {
		h.diag.record(slog.LevelInfo, kindHost, "shutdown requested by connection "+call.Identity.ConnectionID)
		go h.stop(nil)
		return protocol.ShutdownResult{State: protocol.StateDraining}, nil
	})
	return t
}

// Status returns what host.status reports.
func (h *Server) Status() protocol.HostStatus {
	h.mu.Lock()
	state, conns := h.state, len(h.sessions)
	h.mu.Unlock()
	var providers []protocol.ProviderStatus
	if p, ok := h.composition().(Providers); ok {
		providers = p.Providers()
	}
	return protocol.HostStatus{
		HostID:             h.cfg.HostID,
		HostEpoch:          h.epoch,
		PID:                os.Getpid(),
		Version:            h.cfg.Version,
		ProtocolMin:        protocol.ProtocolVersion,
		ProtocolMax:        protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch,
		CompositionID:      h.cfg.CompositionID,
		State:              state,
		StartedAt:          h.startedAt,
		UptimeMillis:       time.Since(h.startedAt).Milliseconds(),
		Connections:        conns,
		ActiveOperations:   int(h.activeOps.Load()),
		ActiveResidencies:  int(h.residencies.Load()),
		Home:               h.cfg.Home,
		LogFile:            h.cfg.LogFile,
		Providers:          providers,
	}
}
