package server

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// hostHandlers returns the operations every server answers, in every
// state: host.status, host.diagnostics.query and host.shutdown. They live
// here, not with the host daemon's own operation (host.upgrade.prepare,
// in internal/host), because a session's worker is served by this server
// too and its host asks it whether it is up and to stop; and all three
// are answered from what the server itself keeps, with what a Reporter
// composition adds.
func (srv *Server) hostHandlers() Table {
	t := Table{}
	Handle(t, protocol.OpHostStatus, func(ctx context.Context, call *Call, _ *protocol.HostStatusInput) (protocol.HostStatus, error) {
		st := srv.Status()
		if call.Caller.Principal.Kind != protocol.PrincipalLocalOwner {
			// The host's files and setup are the owner's to know.
			st.Home, st.LogFile, st.Providers, st.Web, st.WebOff = "", "", nil, nil, ""
		}
		return st, nil
	})
	Handle(t, protocol.OpHostDiagnosticsQuery, func(ctx context.Context, call *Call, in *protocol.DiagnosticsQueryInput) (protocol.DiagnosticsQueryResult, error) {
		return srv.Diagnostics(in.Limit), nil
	})
	Handle(t, protocol.OpHostShutdown, func(ctx context.Context, call *Call, _ *protocol.ShutdownInput) (protocol.ShutdownResult, error) {
		srv.diag.record(slog.LevelInfo, kindHost, "shutdown requested by connection "+call.Identity.ConnectionID)
		srv.Stop()
		return protocol.ShutdownResult{State: protocol.StateDraining}, nil
	})
	return t
}

// Status returns what host.status reports: the server's own figures, and
// what its composition adds when it is a Reporter.
func (srv *Server) Status() protocol.HostStatus {
	srv.mu.Lock()
	state, conns := srv.state, len(srv.served)
	srv.mu.Unlock()
	st := protocol.HostStatus{
		HostID:             srv.cfg.HostID,
		HostEpoch:          srv.epoch,
		PID:                os.Getpid(),
		Version:            srv.cfg.Version,
		ProtocolMin:        protocol.ProtocolVersion,
		ProtocolMax:        protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch,
		CompositionID:      srv.cfg.CompositionID,
		State:              state,
		StartedAt:          srv.startedAt,
		UptimeMillis:       time.Since(srv.startedAt).Milliseconds(),
		Connections:        conns,
		ActiveOperations:   srv.ops.load(),
		ActiveResidencies:  int(srv.residencies.Load()),
		Home:               srv.cfg.Home,
		LogFile:            srv.cfg.LogFile,
	}
	if r, ok := srv.composition().(Reporter); ok {
		r.ReportStatus(&st)
	}
	return st
}

// Diagnostics returns what host.diagnostics.query reports: the limit most
// recent diagnostics, and what the composition adds when it is a
// Reporter.
func (srv *Server) Diagnostics(limit int) protocol.DiagnosticsQueryResult {
	res := srv.diag.recent(limit)
	if r, ok := srv.composition().(Reporter); ok {
		r.ReportDiagnostics(&res)
	}
	return res
}
