package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// A Launch is a command StartAll starts: its program (looked up on PATH
// as exec.Command does), arguments, environment (TMPDIR set to the
// private tmp when sandboxed), directory, and standard files, which
// StartAll neither keeps nor closes.
type Launch struct {
	Name   string
	Args   []string
	Env    []string
	Dir    string
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File
}

// StartAll starts each command under p, each in a process group of its
// own and a child of this process, and returns the process of each, or
// why it did not start (procs[i] nil, errs[i] set). The caller waits for
// each process it gets.
//
// Sandboxed, one re-exec puts the walls up once and starts them all (a
// launcher, see package entry): n commands cost one Go program's start,
// not n, which is what a session's stdio MCP servers, started together,
// need.
func (p *Policy) StartAll(cmds []Launch) (procs []*os.Process, errs []error) {
	procs, errs = make([]*os.Process, len(cmds)), make([]error, len(cmds))
	paths := make([]string, len(cmds))
	for i, c := range cmds {
		if paths[i], errs[i] = exec.LookPath(c.Name); errs[i] != nil {
			continue
		}
		if !p.Sandboxed() {
			procs[i], errs[i] = os.StartProcess(paths[i], append([]string{c.Name}, c.Args...), &os.ProcAttr{
				Dir: c.Dir, Env: c.Env, Files: []*os.File{c.Stdin, c.Stdout, c.Stderr},
				Sys: &syscall.SysProcAttr{Setpgid: true},
			})
		}
	}
	if !p.Sandboxed() {
		return procs, errs
	}
	var todo []int
	for i := range cmds {
		if errs[i] == nil {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return procs, errs
	}
	said, err := p.launch(cmds, paths, todo)
	for _, i := range todo {
		switch pid, ok := said[i]; {
		case !ok && err != nil:
			errs[i] = err
		case !ok:
			errs[i] = errors.New("sandbox: the launcher said nothing of it")
		case pid.err != nil:
			errs[i] = pid.err
		default:
			// Not waited for by anyone yet, the child keeps its pid: the
			// handle (a pidfd) names it.
			procs[i], errs[i] = os.FindProcess(pid.pid)
		}
	}
	return procs, errs
}

// launched is what a launcher said of one command.
type launched struct {
	pid int
	err error
}

// launch starts a launcher for cmds[i] of each i of todo, paths[i] their
// programs, and returns what it said of each, and why it said nothing of
// the others.
func (p *Policy) launch(cmds []Launch, paths []string, todo []int) (map[int]launched, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	exe, err := p.executable()
	if err != nil {
		return nil, err
	}
	rs, file, err := p.rulesetFile()
	if err != nil {
		return nil, err
	}
	defer file.Close()
	cr, cw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cw.Close()
	defer cr.Close()
	rr, rw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	// The launcher holds the ruleset as 3, its commands' pipe as 4, then
	// the standard files of each command, three by three.
	extra := []*os.File{file, cr}
	var msg bytes.Buffer
	field := func(s string) {
		msg.WriteString(s)
		msg.WriteByte(0)
	}
	for _, i := range todo {
		c := cmds[i]
		for _, f := range []*os.File{c.Stdin, c.Stdout, c.Stderr} {
			field(strconv.Itoa(3 + len(extra)))
			extra = append(extra, f)
		}
		dir := c.Dir
		if dir == "" {
			if dir, err = os.Getwd(); err != nil {
				rw.Close()
				return nil, err
			}
		}
		field(dir)
		field(strconv.Itoa(1 + len(c.Args)))
		field(paths[i])
		for _, a := range c.Args {
			field(a)
		}
		env := p.environ(c.Env)
		field(strconv.Itoa(len(env)))
		for _, kv := range env {
			field(kv)
		}
	}
	cmd := exec.Command(exe, append(p.execArgs(rs), "--launch", "4")...)
	cmd.Args[0] = "agentd"
	cmd.Env = []string{} // each command brings its own
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = rw, &stderr
	cmd.ExtraFiles = extra
	err = cmd.Start()
	// The launcher holds its own copies: a launcher gone makes the
	// write below fail instead of wait.
	rw.Close()
	cr.Close()
	file.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting the launcher: %w", err)
	}
	_, werr := cw.Write(msg.Bytes())
	if cerr := cw.Close(); werr == nil {
		werr = cerr
	}
	said := map[int]launched{}
	sc := bufio.NewScanner(rr)
	for k := 0; k < len(todo) && sc.Scan(); k++ {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "pid":
			pid, err := strconv.Atoi(rest)
			if err != nil || pid <= 0 {
				said[todo[k]] = launched{err: fmt.Errorf("sandbox: the launcher said %q", sc.Text())}
				continue
			}
			said[todo[k]] = launched{pid: pid}
		default:
			said[todo[k]] = launched{err: fmt.Errorf("sandbox: %s", rest)}
		}
	}
	if err := cmd.Wait(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
		}
		if werr != nil {
			why += " (handing it the commands: " + werr.Error() + ")"
		}
		// What it started runs: only those it said nothing of failed.
		return said, fmt.Errorf("sandbox: the launcher failed: %s", strings.TrimPrefix(why, "agentd sandbox: "))
	}
	return said, nil
}
