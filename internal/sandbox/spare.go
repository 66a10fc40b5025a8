package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// A spare is a re-exec started ahead of the command it will run: its
// walls are up and it waits, in its own process group with its output
// pipe ready, for its command on a pipe. A shell run then starts without
// waiting for a Go program's start (see docs/sandbox.md).
type spare struct {
	cmd     *exec.Cmd
	out     *os.File // the read end of its output pipe
	control *os.File // the write end of its command pipe
	rs      *ruleset // the ruleset it enforces
}

// startSpareLocked starts a spare enforcing rs. p.mu is held.
func (p *Policy) startSpareLocked(rs *ruleset) (*spare, error) {
	exe, err := p.executable()
	if err != nil {
		return nil, err
	}
	file, err := dup(rs.file)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	cr, cw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cr.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		cw.Close()
		return nil, err
	}
	defer pw.Close()
	argv := append(p.execArgs(rs), "--spare", "4")
	cmd := exec.Command(exe, argv...)
	cmd.Args[0] = "agentd"
	cmd.Env = []string{} // the command's own comes with it
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.ExtraFiles = []*os.File{file, cr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		cw.Close()
		pr.Close()
		return nil, err
	}
	return &spare{cmd: cmd, out: pr, control: cw, rs: rs}, nil
}

// send gives s its command: the directory, the argv and the environment.
func (s *spare) send(dir string, argv, env []string) error {
	var b bytes.Buffer
	b.WriteString(dir)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(len(argv)))
	b.WriteByte(0)
	for _, a := range append(argv, env...) {
		b.WriteString(a)
		b.WriteByte(0)
	}
	_, err := s.control.Write(b.Bytes())
	if cerr := s.control.Close(); err == nil {
		err = cerr
	}
	return err
}

// discard ends a spare that will run nothing: told no command, it exits.
func (s *spare) discard() {
	s.control.Close()
	s.out.Close()
	s.cmd.Wait()
}

// StartPiped starts name with args as StartPiped's callers want a shell
// run: in dir, with env (TMPDIR set to the private tmp when sandboxed),
// stdin from /dev/null, stdout and stderr into one pipe whose read end it
// returns, in a process group of its own. Sandboxed, it runs in a spare
// started ahead when there is one for the current ruleset, and starts
// the next spare.
func (p *Policy) StartPiped(env []string, dir, name string, args ...string) (*exec.Cmd, *os.File, error) {
	if !p.Sandboxed() {
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return startWithPipe(cmd)
	}
	if err := p.check(); err != nil {
		return nil, nil, err
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, nil, err
	}
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, nil, err
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, nil, err
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", dir)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := p.rulesetLocked()
	if err != nil {
		return nil, nil, err
	}
	s := p.spare
	p.spare = nil
	if s != nil && s.rs != rs {
		s.discard() // it enforces a ruleset built anew since
		s = nil
	}
	argv, env := append([]string{path}, args...), p.environ(env)
	// A spare that has gone (killed by someone) takes no command: a new
	// one is started for it.
	for fresh := s == nil; ; fresh = true {
		if s == nil {
			if s, err = p.startSpareLocked(rs); err != nil {
				return nil, nil, err
			}
		}
		err = s.send(dir, argv, env)
		if err == nil {
			break
		}
		s.discard()
		s = nil
		if fresh {
			return nil, nil, fmt.Errorf("sandbox: handing the command over: %w", err)
		}
	}
	p.replenishLocked()
	return s.cmd, s.out, nil
}

// replenishLocked starts the next spare in the background, once the
// command just handed over has started. p.mu is held.
func (p *Policy) replenishLocked() {
	if p.closed || p.replenishing {
		return
	}
	p.replenishing = true
	p.wg.Go(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.replenishing = false
		if p.closed || p.spare != nil || p.rs == nil {
			return
		}
		if s, err := p.startSpareLocked(p.rs); err == nil {
			p.spare = s
		}
	})
}

// startWithPipe starts cmd with stdout and stderr into one pipe, and
// returns the pipe's read end.
func startWithPipe(cmd *exec.Cmd) (*exec.Cmd, *os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close() // the children hold their own copies
	if err != nil {
		pr.Close()
		return nil, nil, err
	}
	return cmd, pr, nil
}
