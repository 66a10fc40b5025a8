package mcp

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"os/exec"

	"github.com/agentd-dev/agentd/internal/sandbox"
)

// maxLineBytes bounds one message a stdio server writes: a result past
// it ends the server's connection, and its call fails.
const maxLineBytes = 32 << 20

// process is a stdio server's process. The server's reader and writer
// are its own pipes, never closed by Wait, so that the last message a
// process writes before it exits is read whole; one goroutine waits for
// it.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // the server's input, written by the connection
	stdout *os.File // the server's output, read by the connection
	done   chan struct{}
	code   int // set before done closes
}

// startProcess starts the stdio server: in the session's sandbox, in its
// own process group, in the session's directory, its stderr kept as its
// resource's output.
func (sv *server) startProcess() (*process, error) {
	var pol *sandbox.Policy
	if sv.s.opts.Sandbox != nil {
		p, err := sv.s.opts.Sandbox(sv.cfg.Network)
		if err != nil {
			return nil, fmt.Errorf("preparing its sandbox: %w", err)
		}
		pol = p
	}
	env := slices.Clone(sv.s.opts.Env)
	for _, k := range sortedKeys(sv.cfg.Env) {
		env = append(env, k+"="+sv.cfg.Env[k])
	}
	cmd, release, err := pol.Command(env, sv.cfg.Command, sv.cfg.Args...)
	if err != nil {
		return nil, fmt.Errorf("cannot start %q: %w", sv.cfg.Command, err)
	}
	defer release()
	cmd.Dir = sv.s.opts.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = stopGrace
	if sv.svc != nil {
		cmd.Stderr = sv.svc
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("cannot start %q in %s: %w", sv.cfg.Command, sv.s.opts.Dir, err)
	}
	p := &process{cmd: cmd, stdin: inW, stdout: outR, done: make(chan struct{})}
	if sv.svc != nil {
		sv.svc.Started(cmd.Process.Pid)
	}
	sv.s.wg.Go(func() {
		cmd.Wait()
		p.code = exitCode(cmd.ProcessState)
		close(p.done)
	})
	return p, nil
}

// end waits for the process to exit once its input is closed, then ends
// its group (SIGTERM, then SIGKILL after the grace), and returns its exit
// code.
func (p *process) end() *int {
	p.stdin.Close()
	if !p.waitFor(stopGrace) {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		if !p.waitFor(stopGrace) {
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-p.done
	// What it left running in its group goes with it.
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
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
