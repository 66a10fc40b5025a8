package resource

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/protocol"
)

// A service is a resource whose process (or remote endpoint) its caller
// runs and speaks to, such as an MCP server: the Manager lists it, keeps
// and logs what the caller writes to it (the process's stderr), records
// it like any other, and asks the caller to end it when it is stopped or
// the Manager drains.

// ServiceInput says what a service is.
type ServiceInput struct {
	// LaunchID makes a retry add nothing new.
	LaunchID string
	// Kind is the resource's kind, protocol.ResourceMCP.
	Kind string
	// Name is what the service is called (the MCP server's name).
	Name string
	// Command is what listings show: the command line, or the URL.
	Command string
	// Stop ends the service, once: the Manager calls it without its locks
	// held when the resource is stopped or the Manager drains, and then
	// waits for Service.End.
	Stop func()
}

// Service is the caller's handle on a service resource.
type Service struct {
	m *Manager
	r *resource
}

// AddService adds a service resource, running, with status starting.
func (m *Manager) AddService(in ServiceInput) (*Service, error) {
	if in.Stop == nil {
		return nil, fmt.Errorf("resource: a service needs Stop")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(); err != nil {
		return nil, m.unreadableLocked(err)
	}
	if m.draining {
		return nil, protocol.Errorf(protocol.CodeDraining, "the session's resources are stopping: nothing new starts")
	}
	cwd, err := m.cfg.Admit()
	if err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("%s-%d", in.Kind, m.refs+1)
	if !validRef(ref) {
		return nil, fmt.Errorf("resource: %q is not a kind of service", in.Kind)
	}
	m.refs++
	r := &resource{
		launch: StartInput{LaunchID: in.LaunchID, Command: in.Command}, stop: in.Stop,
		exited: make(chan struct{}), drained: make(chan struct{}), kept: newRing(keepBytes),
	}
	r.info = protocol.Resource{
		SessionID: m.cfg.SessionID, Ref: ref, Kind: in.Kind, Name: in.Name, Command: redact.Secrets(in.Command), Cwd: cwd,
		State: protocol.ResourceRunning, Status: protocol.ServiceStarting, StartedAt: time.Now().UTC(),
	}
	if m.cfg.Dir != "" {
		if err := os.MkdirAll(m.cfg.Dir, 0o700); err == nil {
			r.log, err = atomicfile.Open(filepath.Join(m.cfg.Dir, ref+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		}
		if err != nil {
			m.cfg.Logger.Error("a resource's output log cannot be written; its output is kept in memory only", "ref", ref, "err", err)
		}
	}
	if err := m.recordLocked(r); err != nil {
		if r.log != nil {
			r.log.Close()
		}
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "%s could not be recorded in the session's folder: %v", ref, err)
	}
	m.byRef[ref] = r
	m.order = append(m.order, r)
	if in.LaunchID != "" {
		m.launches[in.LaunchID] = r
	}
	m.changedLocked(r)
	return &Service{m: m, r: r}, nil
}

// Ref returns the service's ref.
func (s *Service) Ref() string { return s.r.info.Ref }

// Write keeps and logs p, without the keys the process holds, as a shell
// run's output is kept: a process's stderr goes here.
func (s *Service) Write(p []byte) (int, error) {
	s.r.outMu.Lock()
	defer s.r.outMu.Unlock()
	if !s.r.ended {
		s.m.copyLocked(s.r, s.r.secrets.Redact(p))
	}
	return len(p), nil
}

// Started records the process the service runs as, in a process group of
// its own: a later worker kills it if this one ends first.
func (s *Service) Started(pid int) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	s.r.pgid = pid
	if st, err := proc.ReadStat(pid); err == nil {
		s.r.procStart = st.StartTime
	}
	if err := s.m.recordLocked(s.r); err != nil {
		s.m.cfg.Logger.Error("recording a service's process", "ref", s.r.info.Ref, "err", err)
	}
}

// SetStatus says what the service is doing: protocol.ServiceReady, or
// protocol.ServiceFailed with why in detail.
func (s *Service) SetStatus(status, detail string) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.r.info.State == protocol.ResourceExited {
		return
	}
	s.r.info.Status, s.r.info.Detail = status, redact.Secrets(detail)
	s.m.changedLocked(s.r)
}

// End records that the service has ended, with its process's exit code
// when it had one, and why when it failed. Later calls do nothing.
func (s *Service) End(code *int, detail string) {
	s.r.outMu.Lock()
	if !s.r.ended {
		s.m.copyLocked(s.r, s.r.secrets.Flush())
	}
	s.r.ended = true
	if s.r.log != nil {
		s.r.log.Close()
		s.r.log = nil
		s.r.kept = nil // the log holds all of it
	}
	s.r.outMu.Unlock()
	s.m.mu.Lock()
	if s.r.info.State == protocol.ResourceExited {
		s.m.mu.Unlock()
		return
	}
	ended := time.Now().UTC()
	s.r.info.State, s.r.info.ExitCode, s.r.info.EndedAt = protocol.ResourceExited, code, &ended
	if detail != "" {
		s.r.info.Status, s.r.info.Detail = protocol.ServiceFailed, redact.Secrets(detail)
	} else if s.r.info.Status != protocol.ServiceFailed {
		s.r.info.Status = protocol.ServiceStopped
	}
	if err := s.m.recordLocked(s.r); err != nil {
		s.m.cfg.Logger.Error("recording how a service ended", "ref", s.r.info.Ref, "err", err)
	}
	s.m.changedLocked(s.r)
	s.m.mu.Unlock()
	close(s.r.drained)
	close(s.r.exited)
}
