// Package resource runs a session's runtime resources: shell runs, whose
// output is kept, and PTYs, whose screen is kept and whose output streams
// to whoever watches. A Manager owns one session's resources; the worker
// that owns the session owns its Manager. A PTY has at most one controller
// at a time, a client connection that writes to it in sequence; while one
// holds it, nobody else writes to it, the agent included.
package resource

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// Defaults of a Manager.
const (
	// DefaultGrace is how long a stopped resource's processes have between
	// SIGTERM and SIGKILL.
	DefaultGrace = 2 * time.Second
	// keepBytes is how much of a resource's latest output it keeps in
	// memory; all of it goes to its log file.
	keepBytes = 64 << 10
	// DefaultPageSize is how many resources a query lists without a limit.
	DefaultPageSize = 100
	// defaultMaxReplays bounds the control results kept for retries.
	defaultMaxReplays        = 128
	defaultCols, defaultRows = 80, 24
)

// Config configures a Manager.
type Config struct {
	// SessionID is the session the resources belong to.
	SessionID string
	// Dir holds each resource's output log, <ref>.log; empty keeps none.
	Dir string
	// Env is the environment commands start with.
	Env []string
	// Shell runs commands with -c; empty: bash, or sh without it.
	Shell string
	// Sandbox walls in every command the Manager starts, unless a start
	// asks for none (StartInput.Unsandboxed); nil runs them as they are.
	Sandbox *sandbox.Policy
	// Grace is the time between SIGTERM and SIGKILL; 0: DefaultGrace.
	Grace time.Duration
	// Admit is asked, as a resource starts, for the working directory to
	// start it in, or why the session takes no new resource (an archived
	// session, say). Nothing else starts between its answer and the start.
	Admit func() (cwd string, err error)
	// OnUpdate is told each change of a resource's state, in order. It is
	// called with the Manager's lock held: it must not call the Manager.
	OnUpdate func(protocol.Resource)
	// OnOutput is told each piece of a PTY's output, in order, with its
	// sequence in the PTY's output from 1; data is the Manager's again
	// once it returns. It is called with the PTY's lock held: it must not
	// call the Manager.
	OnOutput func(ref string, seq uint64, data []byte)
	// ScreenSleep is how long a PTY prints nothing before its screen
	// model sleeps; 0: DefaultScreenSleep.
	ScreenSleep time.Duration
	// OnScreenSleep is told when a screen model has been dropped: memory
	// the process may give back to the system.
	OnScreenSleep func()
	// OnControlEnd is told the id of each controller that ends, however
	// it ends (released, its connection closed, its PTY exited or
	// stopped, its last sequence used), with the Manager's lock held: it
	// must not call the Manager.
	OnControlEnd func(controllerID string)
	// Logger logs what no caller is told; nil discards.
	Logger *slog.Logger
}

// StartInput says what to start.
type StartInput struct {
	// LaunchID makes a retry start nothing new: the resource it started
	// is answered again.
	LaunchID string
	Command  string
	PTY      bool
	// Cols and Rows size a PTY; 0: 80 × 24.
	Cols, Rows int
	// Unsandboxed runs the command without the Manager's sandbox: a
	// person's shell asked for with sandbox full.
	Unsandboxed bool
}

// Manager owns one session's runtime resources.
type Manager struct {
	cfg         Config
	maxSequence uint64 // constant: the sequence that ends a controller
	maxReplays  int    // constant: the control results kept for retries

	mu          sync.Mutex
	byRef       map[string]*resource     // guarded by mu
	order       []*resource              // guarded by mu: in the order they started
	launches    map[string]*resource     // guarded by mu: by launch id
	controllers map[string]*controller   // guarded by mu: by controller id
	replays     map[string]controlReplay // guarded by mu: by controller id
	replayOrder []string                 // guarded by mu: replays' keys, oldest first
	revision    uint64                   // guarded by mu
	refs        int                      // guarded by mu: refs given out
	ctls        int                      // guarded by mu: controller ids given out
	draining    bool                     // guarded by mu
	loaded      bool                     // guarded by mu: the records of earlier workers are read

	wg sync.WaitGroup // every resource's goroutines
}

// resource is one shell run or PTY.
type resource struct {
	info      protocol.Resource // guarded by Manager.mu
	launch    StartInput        // constant
	pgid      int               // constant
	procStart uint64            // constant: the process's start time, in clock ticks since boot
	out       *os.File          // constant: output is read from it; the PTY's master
	exited    chan struct{}     // closed once the process has been waited for
	drained   chan struct{}     // closed once its output has ended
	ctl       *controller       // guarded by Manager.mu: the PTY's controller
	stopping  bool              // guarded by Manager.mu
	// stop ends a service (its owner runs it); nil for a shell run or PTY.
	// Constant.
	stop func()

	outMu  sync.Mutex
	log    *os.File     // guarded by outMu; nil without a log
	kept   *ring        // guarded by outMu; nil once the output has ended in its log
	watch  func([]byte) // constant: told a shell run's output, called with outMu held
	ptySeq uint64       // guarded by outMu
	carry  []byte       // guarded by outMu: an unfinished UTF-8 sequence
	ended  bool         // guarded by outMu: a service's output has ended
	// secrets removes the keys the process holds from the output, which
	// no log, screen or client gets. Guarded by outMu.
	secrets redact.Stream

	screen *screen // constant: the PTY's screen model; nil for a shell run
}

// controller is a connection's control of one PTY.
type controller struct {
	id   string
	conn string
	res  *resource
	next uint64
}

// controlReplay is the answer to a controller's last call, for a retry.
type controlReplay struct {
	conn   string
	ref    string
	input  protocol.ControlInput
	result protocol.ControlResult
}

// New returns a Manager of no resources.
func New(cfg Config) *Manager {
	if cfg.Shell == "" {
		cfg.Shell = defaultShell()
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.ScreenSleep <= 0 {
		cfg.ScreenSleep = DefaultScreenSleep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Admit == nil {
		cfg.Admit = os.Getwd
	}
	return &Manager{
		cfg: cfg, maxSequence: protocol.MaxControlSequence, maxReplays: defaultMaxReplays,
		byRef: map[string]*resource{}, launches: map[string]*resource{},
		controllers: map[string]*controller{}, replays: map[string]controlReplay{},
	}
}

// Start starts a shell run or a PTY, or answers the one in.LaunchID
// started.
func (m *Manager) Start(in StartInput) (protocol.Resource, error) {
	info, _, err := m.start(in, nil)
	return info, err
}

// Run starts a shell run that someone waits for, as Start does, and also
// passes its output to watch as it comes, in order, one call at a time,
// from its first byte. It returns the run and a channel closed once the
// run has exited, its output passed (but for output a process that left
// its group holds past the grace). A launch id already started answers
// its run, whose output is not passed.
func (m *Manager) Run(in StartInput, watch func([]byte)) (protocol.Resource, <-chan struct{}, error) {
	if in.PTY {
		return protocol.Resource{}, nil, protocol.InvalidField("input.pty", "a run someone waits for is a shell run")
	}
	return m.start(in, watch)
}

// start starts a resource, or finds the one of in.LaunchID, and returns
// its state and the channel closed once it has exited.
func (m *Manager) start(in StartInput, watch func([]byte)) (protocol.Resource, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(); err != nil {
		return protocol.Resource{}, nil, m.unreadableLocked(err)
	}
	if m.draining {
		return protocol.Resource{}, nil, protocol.Errorf(protocol.CodeDraining, "the session's resources are stopping: nothing new starts")
	}
	if r, ok := m.launches[in.LaunchID]; ok {
		if r.launch != in {
			return protocol.Resource{}, nil, protocol.Errorf(protocol.CodeOperationConflict,
				"launch %q started %s with another command or size: choose a new launchId", in.LaunchID, r.info.Ref)
		}
		return r.info, r.exited, nil
	}
	cwd, err := m.cfg.Admit()
	if err != nil {
		return protocol.Resource{}, nil, err
	}
	kind := protocol.ResourceShell
	if in.PTY {
		kind = protocol.ResourcePTY
	}
	ref := fmt.Sprintf("%s-%d", kind, m.refs+1)
	r := &resource{launch: in, watch: watch, exited: make(chan struct{}), drained: make(chan struct{}), kept: newRing(keepBytes)}
	var p *started
	pol := m.cfg.Sandbox
	if in.Unsandboxed {
		pol = nil
	}
	if in.PTY {
		cols, rows := cmp.Or(in.Cols, defaultCols), cmp.Or(in.Rows, defaultRows)
		p, err = startPTY(pol, m.cfg.Shell, in.Command, cwd, m.cfg.Env, cols, rows)
		r.screen = newScreen(cols, rows, m.cfg.ScreenSleep, m.cfg.OnScreenSleep)
	} else {
		p, err = startShell(pol, m.cfg.Shell, in.Command, cwd, m.cfg.Env)
	}
	if err != nil {
		return protocol.Resource{}, nil, protocol.Errorf(protocol.CodeInvalidRequest, "cannot start %q in %s: %v", in.Command, cwd, err)
	}
	m.refs++
	r.pgid, r.out = p.cmd.Process.Pid, p.out
	r.info = protocol.Resource{
		SessionID: m.cfg.SessionID, Ref: ref, Kind: kind, Command: redact.Secrets(in.Command), Cwd: cwd,
		State: protocol.ResourceRunning, StartedAt: time.Now().UTC(),
	}
	if r.screen != nil {
		r.info.Cols, r.info.Rows = r.screen.size()
	}
	if m.cfg.Dir != "" {
		if err := os.MkdirAll(m.cfg.Dir, 0o700); err == nil {
			r.log, err = atomicfile.Open(filepath.Join(m.cfg.Dir, ref+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		}
		if err != nil {
			m.cfg.Logger.Error("a resource's output log cannot be written; its output is kept in memory only", "ref", ref, "err", err)
		}
	}
	if s, err := proc.ReadStat(r.pgid); err == nil {
		r.procStart = s.StartTime
	}
	if err := m.recordLocked(r); err != nil {
		// It runs, but is recorded nowhere: a later worker could not
		// account for it, and a retry of the launch would run it twice.
		// It is stopped before anyone learns of it.
		signalGroup(r.pgid, syscall.SIGKILL)
		p.cmd.Wait()
		p.out.Close()
		if r.log != nil {
			r.log.Close()
		}
		m.cfg.Logger.Error("a runtime resource cannot be recorded; it was stopped", "ref", ref, "pid", r.pgid, "err", err)
		return protocol.Resource{}, nil, protocol.Errorf(protocol.CodeInternalFailure, "%s could not be recorded in the session's folder, so it was stopped: start it again", ref)
	}
	m.byRef[ref] = r
	m.order = append(m.order, r)
	m.launches[in.LaunchID] = r
	m.changedLocked(r)
	if r.screen != nil {
		m.wg.Go(func() { r.screen.run(r.drained) })
	}
	m.wg.Go(func() { m.read(r) })
	m.wg.Go(func() { m.wait(r, p) })
	return r.info, r.exited, nil
}

// changedLocked records a change of r and tells it.
func (m *Manager) changedLocked(r *resource) {
	m.revision++
	if m.cfg.OnUpdate != nil {
		m.cfg.OnUpdate(r.info)
	}
}

// readBytes bounds one piece of a resource's output.
const readBytes = 64 << 10

// read copies r's output to its log, its kept bytes, its screen and the
// PTY's watchers until the output ends.
func (m *Manager) read(r *resource) {
	defer close(r.drained)
	buf := make([]byte, readBytes)
	conn, err := r.out.SyscallConn()
	for err == nil {
		var n int
		n, err = readReady(conn, buf)
		if n > 0 {
			m.output(r, buf[:n])
		}
	}
	m.outputEnd(r)
	r.out.Close()
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.log != nil {
		r.log.Close()
		r.kept = nil // the log holds all of it, and Output reads it there
	}
}

// kernelReadBytes is a PTY master's line discipline's buffer: a read
// shorter than it, or than what it asked for, took all the kernel held.
const kernelReadBytes = 4 << 10

// readReady reads into buf what the file of c has ready, waiting for its
// first byte only. A PTY hands its output over a few KiB a read, and
// each piece of output costs a log write, a frame and a wake-up: a
// program that prints faster than the output is carried gets it carried
// in fewer, larger pieces, without one waiting for the next. A short
// read ends the piece, which goes on at once: a keystroke's echo costs
// one read, not a second one that finds nothing. The file is in
// nonblocking mode (a pipe as os.Pipe makes it, a PTY's master as
// startPTY leaves it).
func readReady(c syscall.RawConn, buf []byte) (n int, err error) {
	werr := c.Read(func(fd uintptr) bool {
		for n < len(buf) {
			k, e := syscall.Read(int(fd), buf[n:])
			switch {
			case k > 0:
				n += k
				if k < min(kernelReadBytes, len(buf)-n+k) {
					return true
				}
			case e == syscall.EINTR:
			case e == syscall.EAGAIN:
				return n > 0 // nothing ready: wait for some, unless there is a piece
			case e == nil:
				err = io.EOF
				return true
			default:
				err = e
				return true
			}
		}
		return true
	})
	return n, cmp.Or(err, werr)
}

// output copies a piece p of r's output, without the keys the process
// holds (redact.Stream), to r's log, kept bytes, watcher, screen and the
// PTY's watchers.
func (m *Manager) output(r *resource, p []byte) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	m.copyLocked(r, r.secrets.Redact(p))
}

// outputEnd copies what output held back of r's output, once it ended.
func (m *Manager) outputEnd(r *resource) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	m.copyLocked(r, r.secrets.Flush())
}

// copyLocked copies p, redacted, where output says. Call with r.outMu
// held: a reader of the output holds it too, and finds p in every place
// or in none.
//
// The PTY's watchers have p before the log does: a file write may wait
// on the file system (a journal's commit, a busy disk), and a key's echo
// does not wait with it.
func (m *Manager) copyLocked(r *resource, p []byte) {
	if len(p) == 0 {
		return
	}
	r.kept.Write(p)
	if r.watch != nil {
		r.watch(p)
	}
	if r.screen != nil {
		m.showLocked(r, p)
	}
	if r.log != nil {
		if _, err := r.log.Write(p); err != nil {
			m.cfg.Logger.Error("writing a resource's output log; its output is kept in memory only", "ref", r.info.Ref, "err", err)
			r.log.Close()
			r.log = nil
		}
	}
}

// showLocked passes p to r's screen and the PTY's watchers, whole UTF-8
// sequences only. Call with r.outMu held.
func (m *Manager) showLocked(r *resource, p []byte) {
	data := p
	if len(r.carry) > 0 {
		data = append(r.carry, p...)
	}
	cut := len(data)
	// Hold back a UTF-8 sequence the read cut in two, to send it whole.
	for i := 1; i <= utf8.UTFMax-1 && i <= len(data); i++ {
		b := data[len(data)-i]
		if b < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(data[len(data)-i:]) {
				cut = len(data) - i
			}
			break
		}
	}
	if cut > 0 {
		r.ptySeq++
		r.screen.add(data[:cut], r.ptySeq)
		if m.cfg.OnOutput != nil {
			m.cfg.OnOutput(r.info.Ref, r.ptySeq, data[:cut])
		}
	}
	// Only now: data may be in the carry's memory.
	r.carry = append(r.carry[:0], data[cut:]...)
}

// wait waits for r's process and records how it ended.
func (m *Manager) wait(r *resource, p *started) {
	err := p.cmd.Wait()
	if r.watch != nil {
		// A run someone waits for ends with its command: what it left
		// running in its group is ended too (SIGTERM, then SIGKILL after
		// the grace). The group's id is not given to another while a
		// process of it remains.
		signalGroup(r.pgid, syscall.SIGTERM)
		awaitDrained(r, m.cfg.Grace)
		signalGroup(r.pgid, syscall.SIGKILL)
	}
	// Its output goes out before its end, so that a watcher that stops at
	// the end has all of it; output a process that left the group holds
	// open is not waited for past the grace.
	awaitDrained(r, m.cfg.Grace)
	code := -1
	if p.cmd.ProcessState != nil {
		code = exitCode(p.cmd.ProcessState)
	} else {
		m.cfg.Logger.Error("waiting for a resource's process", "ref", r.info.Ref, "err", err)
	}
	m.mu.Lock()
	ended := time.Now().UTC()
	r.info.State, r.info.ExitCode, r.info.EndedAt = protocol.ResourceExited, &code, &ended
	// The recorded end names no controller; the end is told before the
	// controller ends, so that whoever reads the PTY for the controller
	// hears of it.
	ctl := r.ctl
	r.ctl, r.info.Controller = nil, nil
	if err := m.recordLocked(r); err != nil {
		m.cfg.Logger.Error("recording how a runtime resource ended", "ref", r.info.Ref, "err", err)
	}
	m.changedLocked(r)
	m.releaseLocked(ctl)
	m.mu.Unlock()
	close(r.exited)
}

// awaitDrained waits until r's output has ended, or grace has passed.
func awaitDrained(r *resource, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-r.drained:
	case <-t.C:
	}
}

// Stop ends a resource's processes (SIGTERM, then SIGKILL after the
// grace) and answers its state once it has exited.
func (m *Manager) Stop(ref string) (protocol.Resource, error) {
	m.mu.Lock()
	r, err := m.findLocked(ref)
	ended := err == nil && r.info.State == protocol.ResourceExited
	if err == nil && !ended {
		m.releaseLocked(r.ctl)
		r.stopping = true
	}
	m.mu.Unlock()
	if err != nil {
		return protocol.Resource{}, err
	}
	if !ended {
		// An ended resource's group is not signalled: its id may be
		// another's by now.
		m.end(r)
	}
	<-r.exited
	m.mu.Lock()
	defer m.mu.Unlock()
	return r.info, nil
}

// Get answers one resource's state.
func (m *Manager) Get(ref string) (protocol.Resource, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.findLocked(ref)
	if err != nil {
		return protocol.Resource{}, err
	}
	return r.info, nil
}

// Output answers the output r keeps (its latest, up to 64 KiB) and how
// many bytes before it are no longer kept.
func (m *Manager) Output(ref string) (data []byte, dropped int64, err error) {
	m.mu.Lock()
	r, err := m.findLocked(ref)
	m.mu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.kept == nil {
		data, size := m.logTail(ref)
		return data, size - int64(len(data)), nil
	}
	return r.kept.Bytes(), r.kept.Dropped(), nil
}

// Running reports how many resources run, services (which run as long as
// their owner does) left out.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.order {
		if r.info.State == protocol.ResourceRunning && r.stop == nil {
			n++
		}
	}
	return n
}

// findLocked finds the resource ref names.
func (m *Manager) findLocked(ref string) (*resource, error) {
	if err := m.loadLocked(); err != nil {
		return nil, m.unreadableLocked(err)
	}
	if !validRef(ref) {
		return nil, protocol.InvalidField("input.ref", "%q is not a resource's ref (shell-N, pty-N or mcp-N)", ref)
	}
	r, ok := m.byRef[ref]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no resource %s in session %s: `agentd ps` lists them", ref, m.cfg.SessionID)
	}
	return r, nil
}

// validRef reports whether ref has the form of a resource's ref.
func validRef(ref string) bool {
	kind, n, ok := strings.Cut(ref, "-")
	if !ok || (kind != protocol.ResourceShell && kind != protocol.ResourcePTY && kind != protocol.ResourceMCP) {
		return false
	}
	i, err := strconv.ParseUint(n, 10, 31)
	return err == nil && i > 0 && strconv.FormatUint(i, 10) == n
}

// Query lists the resources, in the order they started, a page at a time;
// or reads one, with in.Ref. A page after the first names the revision it
// continues: when the resources changed since, the query conflicts and
// the listing starts again.
func (m *Manager) Query(in protocol.ResourceQueryInput) (protocol.ResourceQueryResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(); err != nil {
		return protocol.ResourceQueryResult{}, m.unreadableLocked(err)
	}
	res := protocol.ResourceQueryResult{Revision: m.revision, Resources: []protocol.Resource{}}
	if in.Ref != "" {
		if in.Cursor != nil {
			return res, protocol.InvalidField("input.cursor", "pages a listing: it does not go with input.ref")
		}
		r, err := m.findLocked(in.Ref)
		if err != nil {
			return res, err
		}
		res.Resources = append(res.Resources, r.info)
		return res, nil
	}
	from := 0
	if in.Cursor != nil {
		if in.Revision == nil {
			return res, protocol.InvalidField("input.revision", "is required with input.cursor: the revision of the page the cursor came with")
		}
		n, err := strconv.Atoi(*in.Cursor)
		if err != nil || n <= 0 || n >= len(m.order) || strconv.Itoa(n) != *in.Cursor {
			return res, protocol.InvalidField("input.cursor", "%q is not a cursor of this listing", *in.Cursor)
		}
		if *in.Revision != m.revision {
			return res, protocol.Errorf(protocol.CodeOperationConflict,
				"the session's resources changed since revision %d (now %d): list them again from the start", *in.Revision, m.revision)
		}
		from = n
	}
	limit := cmp.Or(in.Limit, DefaultPageSize)
	to := min(from+limit, len(m.order))
	for _, r := range m.order[from:to] {
		res.Resources = append(res.Resources, r.info)
	}
	if to < len(m.order) {
		next := strconv.Itoa(to)
		res.NextCursor = &next
	}
	return res, nil
}

// Write writes data to a PTY for the agent: refused while a client
// controls it.
func (m *Manager) Write(ref string, data []byte) error {
	m.mu.Lock()
	r, err := m.writableLocked(ref)
	if err == nil && r.ctl != nil {
		err = protocol.Errorf(protocol.CodeOperationConflict, "%s is controlled by a person's terminal: the agent cannot write to it until they release it", ref)
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return m.write(r, data)
}

// writableLocked finds a running PTY.
func (m *Manager) writableLocked(ref string) (*resource, error) {
	r, err := m.findLocked(ref)
	switch {
	case err != nil:
		return nil, err
	case r.screen == nil:
		return nil, protocol.Errorf(protocol.CodeOperationConflict, "%s is a shell run, which takes no input: start a PTY to type into", ref)
	case r.info.State != protocol.ResourceRunning || r.stopping:
		return nil, protocol.Errorf(protocol.CodeOperationConflict, "%s has exited", ref)
	}
	return r, nil
}

func (m *Manager) write(r *resource, data []byte) error {
	if _, err := r.out.Write(data); err != nil {
		return protocol.Errorf(protocol.CodeOperationConflict, "%s is ending: its input is closed", r.info.Ref)
	}
	return nil
}

// ScreenText answers a PTY's screen as plain text, without its styles,
// after all output so far.
func (m *Manager) ScreenText(ref string) (string, error) {
	m.mu.Lock()
	r, err := m.findLocked(ref)
	m.mu.Unlock()
	if err != nil {
		return "", err
	}
	if r.screen == nil {
		return "", protocol.Errorf(protocol.CodeInvalidRequest, "%s is a shell run, which has no screen", ref)
	}
	return r.screen.text(), nil
}

// LogPath returns the file a resource's output is logged to, or "" when
// it has none.
func (m *Manager) LogPath(ref string) string {
	if m.cfg.Dir == "" {
		return ""
	}
	return filepath.Join(m.cfg.Dir, ref+".log")
}

// Screen calls fn with a PTY's screen as it is now, drawn as a terminal
// draws it (the cursor left where the program left it), and the sequence
// of the last output it shows. No output is passed to OnOutput while fn
// runs, so whatever fn starts watching from there misses nothing: the
// output after the screen comes with later sequences.
func (m *Manager) Screen(ref string, fn func(screen string, seq uint64)) error {
	m.mu.Lock()
	r, err := m.findLocked(ref)
	if err == nil && r.screen == nil {
		err = protocol.Errorf(protocol.CodeInvalidRequest, "%s is a shell run, which has no screen", ref)
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	lines, cursor, seq := r.screen.draw()
	fn(drawLines(lines, cursor), seq)
	return nil
}

// Drain refuses new resources, ends every controller and stops every
// running resource; it returns once they have exited.
func (m *Manager) Drain() {
	m.mu.Lock()
	m.draining = true
	clear(m.controllers)
	clear(m.replays)
	m.replayOrder = nil
	live := make([]*resource, 0, len(m.order))
	for _, r := range m.order {
		r.ctl, r.info.Controller = nil, nil
		if r.info.State == protocol.ResourceRunning {
			r.stopping = true
			live = append(live, r)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range live {
		wg.Go(func() {
			m.end(r)
			<-r.exited
		})
	}
	wg.Wait()
}

// Close drains the Manager and waits for its goroutines. Output a process
// that left its group still holds open is abandoned after the grace.
func (m *Manager) Close() {
	m.Drain()
	m.mu.Lock()
	all := slices.Clone(m.order)
	m.mu.Unlock()
	t := time.NewTimer(m.cfg.Grace)
	defer t.Stop()
	late := false
	for _, r := range all {
		if !late {
			select {
			case <-r.drained:
				continue
			case <-t.C:
				late = true
			}
		}
		if r.out != nil { // a service has none
			r.out.Close() // unblocks its reader
		}
	}
	m.wg.Wait()
}

// end ends r's processes: a service through its owner, a command's group
// with SIGTERM, then SIGKILL after the grace.
func (m *Manager) end(r *resource) {
	if r.stop != nil {
		r.stop()
		return
	}
	terminate(r.pgid, r.exited, m.cfg.Grace)
}
