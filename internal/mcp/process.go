package mcp

import (
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/sandbox"
)

// maxLineBytes bounds one message a stdio server writes: a result past
// it ends the server's connection, and its call fails.
const maxLineBytes = 32 << 20

// process is a stdio server's process. The server's reader and writer
// are its own pipes, never closed by its end, so that the last message a
// process writes before it exits is read whole; one goroutine waits for
// it.
type process struct {
	proc   *os.Process
	stdin  *os.File // the server's input, written by the connection
	stdout *os.File // the server's output, read by the connection
	done   chan struct{}
	code   int // set before done closes
}

// launcher starts a session's stdio servers together, in the background
// of the worker's start: those that share a sandbox start from one
// re-exec (sandbox.Policy.StartAll), which puts the walls up once for all
// of them. Each server's start waits for it.
type launcher struct {
	ss    *Servers
	done  chan struct{}        // closed once every server has started or failed to
	procs map[*server]*process // constant once done is closed
	errs  map[*server]error    // constant once done is closed
}

func newLauncher(ss *Servers) *launcher {
	return &launcher{ss: ss, done: make(chan struct{}), procs: map[*server]*process{}, errs: map[*server]error{}}
}

// process waits for sv's start and returns its process.
func (l *launcher) process(sv *server) (*process, error) {
	<-l.done
	if err := l.errs[sv]; err != nil {
		return nil, err
	}
	return l.procs[sv], nil
}

// start starts servers: in the session's sandbox (the one each server's
// network asks for), each in its own process group, in the session's
// directory, its stderr kept as its resource's output.
func (l *launcher) start(servers []*server) {
	defer close(l.done)
	opts := l.ss.opts
	type group struct {
		pol     *sandbox.Policy
		servers []*server
		cmds    []sandbox.Launch
		pipes   []*pipes
	}
	var groups []*group
	byPolicy := map[*sandbox.Policy]*group{}
	for _, sv := range servers {
		var pol *sandbox.Policy
		if opts.Sandbox != nil {
			p, err := opts.Sandbox(sv.cfg.Network)
			if err != nil {
				l.errs[sv] = fmt.Errorf("preparing its sandbox: %w", err)
				continue
			}
			pol = p
		}
		pp, err := newPipes()
		if err != nil {
			l.errs[sv] = fmt.Errorf("cannot start %q: %w", sv.cfg.Command, err)
			continue
		}
		env := slices.Clone(opts.Env)
		for _, k := range sortedKeys(sv.cfg.Env) {
			env = append(env, k+"="+sv.cfg.Env[k])
		}
		g := byPolicy[pol]
		if g == nil {
			g = &group{pol: pol}
			byPolicy[pol] = g
			groups = append(groups, g)
		}
		g.servers = append(g.servers, sv)
		g.pipes = append(g.pipes, pp)
		g.cmds = append(g.cmds, sandbox.Launch{
			Name: sv.cfg.Command, Args: sv.cfg.Args, Env: env, Dir: opts.Dir,
			Stdin: pp.inR, Stdout: pp.outW, Stderr: pp.errW,
		})
	}
	for _, g := range groups {
		procs, errs := g.pol.StartAll(g.cmds)
		for i, sv := range g.servers {
			pp := g.pipes[i]
			pp.closeChildEnds()
			if errs[i] != nil {
				pp.closeOurEnds()
				l.errs[sv] = fmt.Errorf("cannot start %q in %s: %w", sv.cfg.Command, opts.Dir, errs[i])
				continue
			}
			l.procs[sv] = sv.watch(procs[i], pp)
		}
	}
}

// pipes are a stdio server's standard files: both ends of each.
type pipes struct {
	inR, inW, outR, outW, errR, errW *os.File
}

func newPipes() (*pipes, error) {
	var pp pipes
	var err error
	if pp.inR, pp.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if pp.outR, pp.outW, err = os.Pipe(); err == nil {
		if pp.errR, pp.errW, err = os.Pipe(); err == nil {
			return &pp, nil
		}
	}
	pp.closeChildEnds()
	pp.closeOurEnds()
	return nil, err
}

// closeChildEnds closes what the server holds its own copy of.
func (pp *pipes) closeChildEnds() { closeAll(pp.inR, pp.outW, pp.errW) }

func (pp *pipes) closeOurEnds() { closeAll(pp.inW, pp.outR, pp.errR) }

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// watch returns the process of the server just started: its stderr is
// copied into its resource's output until its end, and one goroutine
// waits for it. As exec.Cmd's WaitDelay does, the copy is cut stopGrace
// after the process exits, when something it left holds its stderr.
func (sv *server) watch(proc *os.Process, pp *pipes) *process {
	p := &process{proc: proc, stdin: pp.inW, stdout: pp.outR, done: make(chan struct{})}
	if sv.svc != nil {
		sv.svc.Started(proc.Pid)
	}
	var sink io.Writer = io.Discard
	if sv.svc != nil {
		sink = sv.svc
	}
	copied := make(chan struct{})
	sv.s.wg.Go(func() {
		defer close(copied)
		io.Copy(sink, pp.errR)
	})
	sv.s.wg.Go(func() {
		st, _ := proc.Wait()
		t := time.NewTimer(stopGrace)
		select {
		case <-copied:
		case <-t.C:
		}
		t.Stop()
		pp.errR.Close()
		<-copied
		p.code = exitCode(st)
		close(p.done)
	})
	return p
}

// end waits for the process to exit once its input is closed, then ends
// its group (SIGTERM, then SIGKILL after the grace), and returns its exit
// code.
func (p *process) end() *int {
	p.stdin.Close()
	if !p.waitFor(stopGrace) {
		syscall.Kill(-p.proc.Pid, syscall.SIGTERM)
		if !p.waitFor(stopGrace) {
			syscall.Kill(-p.proc.Pid, syscall.SIGKILL)
		}
	}
	<-p.done
	// What it left running in its group goes with it.
	syscall.Kill(-p.proc.Pid, syscall.SIGKILL)
	p.stdout.Close()
	return &p.code
}

func (p *process) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// exitCode is how a shell reports a process's end: its status, or 128 and
// the signal that ended it.
func exitCode(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
