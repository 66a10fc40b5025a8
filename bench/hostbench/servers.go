package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/protocol"
)

// roleFlag as the first argument makes this binary a server: the anchors'
// echo servers, or (with -profile) the host under test.
const roleFlag = "-role"

// Server roles.
const (
	roleRawEcho  = "rawecho"
	roleJSONEcho = "jsonecho"
	roleHost     = "host"
)

// runRole runs this binary as a server until SIGTERM. args are the role's
// name then its flags.
func runRole(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "hostbench: -role needs a name")
		return 2
	}
	role := args[0]
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	sock := fs.String("sock", "", "unix socket to listen on")
	statusBytes := fs.Int("status-bytes", 0, "size of the host.status response frame to send")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile here")
	home := fs.String("home", "", "host role: the home")
	runDir := fs.String("rundir", "", "host role: the runtime directory")
	hostID := fs.String("hostid", "", "host role: the host id")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)

	switch role {
	case roleRawEcho, roleJSONEcho:
		ln, err := net.Listen("unix", *sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var serve func(net.Conn)
		if role == roleRawEcho {
			serve = serveRawEcho
		} else {
			serve = newJSONEcho(*statusBytes).serve
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { serve(c) })
			}
		})
		fmt.Println("ready")
		<-term
		ln.Close()
		return 0
	case roleHost:
		h, err := host.Open(host.Config{
			Home: *home, RuntimeDir: *runDir, HostID: *hostID,
			Version: "bench", Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() {
			select {
			case <-h.Ready():
				fmt.Println("ready")
			case <-ctx.Done():
				return
			}
			<-term
			stop()
		}()
		if err := h.Run(ctx); !errors.Is(err, host.ErrStopped) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "hostbench: unknown role %q\n", role)
	return 2
}

// serveRawEcho writes every line it reads straight back: the floor of a
// round trip over a unix socket.
func serveRawEcho(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		w.Write(line)
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// jsonEcho is the JSON anchor: it decodes each request line with
// encoding/json, decodes its input, and encodes a response of the same shape
// and size as agentd's.
type jsonEcho struct {
	started time.Time
	status  protocol.HostStatus // Version padded to the asked frame size
}

// echoRequest is a request frame as the JSON echo server decodes it.
type echoRequest struct {
	RequestID string          `json:"requestId"`
	Operation string          `json:"operation"`
	Input     json.RawMessage `json:"input"`
}

type echoInput struct {
	Limit int `json:"limit,omitempty"`
}

type echoResponse struct {
	RequestID string `json:"requestId"`
	Operation string `json:"operation"`
	OK        bool   `json:"ok"`
	Result    any    `json:"result"`
}

// sizingRequestID is the request id both sides size frames with.
const sizingRequestID = "r1000"

func newJSONEcho(statusBytes int) *jsonEcho {
	e := &jsonEcho{started: time.Now().UTC()}
	e.status = protocol.HostStatus{
		HostID: "b", HostEpoch: "0123456789abcdef", PID: os.Getpid(),
		ProtocolMin: 1, ProtocolMax: 1, CompatibilityEpoch: 1,
		CompositionID: protocol.CompositionInteractive, State: protocol.StateReady,
		StartedAt: e.started, Connections: 1, ActiveOperations: 1,
	}
	// Size with a five-digit uptime, as the host's is during a run.
	sizing := e.status
	sizing.UptimeMillis = 10000
	b, _ := json.Marshal(echoResponse{RequestID: sizingRequestID, Operation: string(protocol.OpHostStatus), OK: true, Result: sizing})
	if pad := statusBytes - len(b); pad > 0 {
		e.status.Version = strings.Repeat("v", pad)
	}
	return e
}

func (e *jsonEcho) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	empty := []protocol.Diagnostic{}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		var req echoRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return
		}
		var in echoInput
		if len(req.Input) > 0 {
			if err := json.Unmarshal(req.Input, &in); err != nil {
				return
			}
		}
		resp := echoResponse{RequestID: req.RequestID, Operation: req.Operation, OK: true}
		if req.Operation == string(protocol.OpHostStatus) {
			st := e.status
			st.UptimeMillis = time.Since(e.started).Milliseconds()
			resp.Result = st
		} else {
			resp.Result = protocol.DiagnosticsQueryResult{Diagnostics: empty}
		}
		out, err := json.Marshal(resp)
		if err != nil {
			return
		}
		w.Write(out)
		w.WriteByte('\n')
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// proc is a server process this run started.
type proc struct {
	name string
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
}

// startRole starts this binary in role, listening on sock, and waits until
// it says it is ready.
func (b *bench) startRole(ctx context.Context, name, role string, args ...string) (*proc, error) {
	cmd := command(ctx, nil, b.self, append([]string{roleFlag, role}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	b.procs = append(b.procs, p)
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, out)
	}()
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("starting %s: not ready after 30s", name)
	}
	return p, nil
}

// startAgentdHost runs `agentd host` on home and runDir (or, with -profile,
// host.Open and Run inside this binary) and waits until its registration says
// ready. It returns the process and the socket to dial.
func (b *bench) startAgentdHost(ctx context.Context, home, runDir, hostID string) (*proc, string, error) {
	var cmd *exec.Cmd
	if b.cfg.profile != "" {
		cmd = command(ctx, nil, b.self, roleFlag, roleHost, "-home", home, "-rundir", runDir, "-hostid", hostID,
			"-cpuprofile", b.profilePath("host"))
	} else {
		cmd = command(ctx, placement(home, runDir, hostID), b.agentd, "host", "--log-file", home+".log")
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	p := &proc{name: "agentd host", cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	b.procs = append(b.procs, p)
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	reg := protocol.RegistrationPath(runDir, hostID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r protocol.Registration
		if raw, err := os.ReadFile(reg); err == nil && json.Unmarshal(raw, &r) == nil &&
			r.State == protocol.StateReady && r.PID == p.pid {
			return p, r.Endpoint, nil
		}
		select {
		case <-p.done:
			return nil, "", errors.New("agentd host exited before it was ready")
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, "", errors.New("agentd host not ready after 30s")
		}
	}
}

func (b *bench) profilePath(name string) string {
	if b.cfg.profile == "" {
		return ""
	}
	return b.cfg.profile + string(os.PathSeparator) + name + ".cpu.pprof"
}

// placement is the environment that places a host's files.
func placement(home, runDir, hostID string) []string {
	env := []string{protocol.EnvHome + "=" + home, protocol.EnvRuntimeDir + "=" + runDir}
	if hostID != "" {
		env = append(env, protocol.EnvHostID+"="+hostID)
	}
	return env
}

// command is exec.CommandContext with extra environment entries.
func command(ctx context.Context, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return cmd
}

// stop ends the process: SIGTERM, then SIGKILL after five seconds.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}
