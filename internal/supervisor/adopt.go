package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/proc"
)

// Registrations reads the workers' registrations in the home; one that
// cannot be read is removed.
func (s *Supervisor) Registrations() []home.WorkerRegistration {
	dir := home.WorkerRegistryDir(s.cfg.Home)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var regs []home.WorkerRegistration
	for _, de := range des {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, de.Name())
		reg, err := home.ReadWorkerRegistration(path)
		if err != nil {
			s.log.Warn("removing a worker registration that cannot be read", "path", path, "err", err)
			os.Remove(path)
			continue
		}
		regs = append(regs, reg)
	}
	return regs
}

// Adopt takes over the worker reg names, when it still runs: it connects,
// checks that the process answering is the one registered, and returns it,
// watched like a worker this host started. A worker that is gone is
// cleaned up after (ErrGone); one that does not answer as that worker by
// the end of ctx (hung, say) is killed as lost (ErrLost), so that it
// cannot hold the new host back.
func (s *Supervisor) Adopt(ctx context.Context, reg home.WorkerRegistration) (*Worker, error) {
	pidfd, err := proc.OpenPidfd(reg.PID)
	// Checked once the pidfd is open: it names the process of that start
	// time, not one that took the pid since.
	if err != nil || !proc.RunningSince(reg.PID, reg.ProcessStart) {
		if pidfd != nil {
			pidfd.Close()
		}
		// It exited (killed with its host, say): clean up after it. What
		// it left running in its process session is ended, unless its pid
		// now names another process, whose session that may be.
		if proc.Running(reg.PID) {
			os.Remove(home.WorkerRegistrationPath(s.cfg.Home, reg.SessionID))
		} else {
			s.cleanUpAfter(reg.SessionID, reg.PID)
		}
		s.removeEndpoint(reg)
		return nil, ErrGone
	}
	// A registration is a file in the home, which anything of the user's
	// can write: the process it names is signalled only once it shows it
	// is this home's worker of that session.
	if err := s.isWorker(reg); err != nil {
		pidfd.Close()
		s.log.Warn("leaving alone the process a worker registration names: it is not the session's worker", "session", reg.SessionID, "pid", reg.PID, "why", err)
		os.Remove(home.WorkerRegistrationPath(s.cfg.Home, reg.SessionID))
		return nil, fmt.Errorf("%w: pid %d: %v", ErrGone, reg.PID, err)
	}
	c, err := link.Dial(ctx, reg.Endpoint)
	if err == nil {
		st, serr := c.Status(ctx)
		if serr == nil && st.PID != reg.PID {
			serr = fmt.Errorf("another process (pid %d) answers at its socket", st.PID)
		}
		if serr != nil {
			c.Close()
			err = serr
		}
	}
	if err != nil {
		s.stopLost(pidfd, reg)
		return nil, fmt.Errorf("%w: %v", ErrLost, err)
	}
	w := s.newWorker(reg.SessionID, reg.PID, c, pidfd, reg.Endpoint)
	s.wg.Go(w.watch)
	return w, nil
}

// stopLost kills the worker reg names, which pidfd holds, and cleans up
// after it.
func (s *Supervisor) stopLost(pidfd *os.File, reg home.WorkerRegistration) {
	defer pidfd.Close()
	proc.SignalPidfd(pidfd, syscall.SIGKILL)
	pidfd.SetReadDeadline(time.Now().Add(exitWait))
	if err := proc.AwaitPidfd(pidfd); err != nil {
		s.log.Warn("a lost worker killed has not exited yet", "session", reg.SessionID, "pid", reg.PID, "err", err)
	}
	s.cleanUpAfter(reg.SessionID, reg.PID)
	s.removeEndpoint(reg)
}

// isWorker reports why the process reg names is not this home's agentd
// worker of reg's session, or nil: it must run as this user, with the
// worker command and the flags Start gives it for that session, home and
// socket. The command line is readable of any process, undumpable ones
// included.
func (s *Supervisor) isWorker(reg home.WorkerRegistration) error {
	uid, err := proc.UID(reg.PID)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return fmt.Errorf("it runs as user %d, not %d", uid, os.Getuid())
	}
	args, err := proc.Args(reg.PID)
	if err != nil {
		return err
	}
	sub := s.cfg.Command[1:]
	if len(args) <= len(sub) || !slices.Equal(args[1:1+len(sub)], sub) {
		return fmt.Errorf("its command line %q is not the worker command's %q", args, sub)
	}
	for flag, want := range map[string]string{"--session": reg.SessionID, "--home": s.cfg.Home, "--socket": reg.Endpoint} {
		i := slices.Index(args, flag)
		if i < 0 || i+1 >= len(args) || args[i+1] != want {
			return fmt.Errorf("its command line does not say %s %s", flag, want)
		}
	}
	return nil
}

// removeEndpoint removes the socket of the worker reg names, when it is
// one this host's workers listen at: a registration names any path it
// likes.
func (s *Supervisor) removeEndpoint(reg home.WorkerRegistration) {
	if filepath.Dir(reg.Endpoint) == filepath.Clean(s.cfg.RuntimeDir) && strings.HasSuffix(reg.Endpoint, ".sock") {
		os.Remove(reg.Endpoint)
	}
}

// RemoveStaleSockets removes the sockets of this host's workers that no
// worker serves any more (those of workers killed with their host): every
// one but those of the sessions live names.
func (s *Supervisor) RemoveStaleSockets(live func(sessionID string) bool) {
	prefix := s.cfg.HostID + "-w-"
	socks, _ := filepath.Glob(filepath.Join(s.cfg.RuntimeDir, prefix+"*.sock"))
	for _, sock := range socks {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sock), prefix), ".sock")
		if !live(id) {
			os.Remove(sock)
		}
	}
}
