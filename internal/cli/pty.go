package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// detachKey is Ctrl-\: typed on an attached PTY, it detaches and leaves
// the PTY running.
const detachKey = 0x1c

// exitCodeError ends a command with an exit code of its own, having said
// all there was to say.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newPsCmd(e *env) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "ps [SESSION]",
		Short: "List a session's shell runs and PTYs (default: the current directory's latest session).",
		Args:  resourceSessionArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			id, c, err := sessionOfArgs(ctx, args)
			if err != nil {
				return err
			}
			defer c.Close()
			rs, err := c.Resources(ctx, id)
			if err != nil {
				return err
			}
			rs, hidden := recentResources(rs, all)
			if asJSON {
				return writeJSON(e.stdout, nonNil(rs))
			}
			if len(rs) == 0 {
				fmt.Fprintf(e.stdout, "session %s runs nothing: `agentd shell %s` starts a shell\n", id, id)
				return nil
			}
			now := time.Now()
			fmt.Fprintf(e.stdout, "%-9s %-6s %-8s %-6s %-5s %s\n", "REF", "KIND", "STATE", "AGE", "EXIT", "COMMAND")
			for _, r := range rs {
				exit := "-"
				if r.ExitCode != nil {
					exit = fmt.Sprint(*r.ExitCode)
				}
				state, command := r.State, r.Command
				if r.Status != "" { // a service: an MCP server
					state, command = r.Status, r.Name+": "+r.Command
				}
				fmt.Fprintf(e.stdout, "%-9s %-6s %-8s %-6s %-5s %s\n", oneLine(r.Ref), oneLine(r.Kind), oneLine(state), tui.Age(now.Sub(r.StartedAt)), exit, oneLine(command))
			}
			if hidden > 0 {
				fmt.Fprintf(e.stdout, "and %d earlier ended runs: `agentd ps --all %s` lists them\n", hidden, id)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the resources as a JSON array")
	cmd.Flags().BoolVarP(&all, "all", "a", false, fmt.Sprintf("list every ended run, not only the last %d", recentEnded))
	return cmd
}

// recentEnded is how many ended runs ps lists without --all: every
// command the agent runs is one.
const recentEnded = 10

// recentResources returns, in the order they started, the resources
// running and the last recentEnded that ended (all of them with all),
// and how many it left out.
func recentResources(rs []protocol.Resource, all bool) ([]protocol.Resource, int) {
	if all {
		return rs, 0
	}
	ended := 0
	for _, r := range rs {
		if r.State != protocol.ResourceRunning {
			ended++
		}
	}
	skip := max(0, ended-recentEnded)
	shown := make([]protocol.Resource, 0, len(rs)-skip)
	for _, r := range rs {
		if r.State != protocol.ResourceRunning && skip > 0 {
			skip--
			continue
		}
		shown = append(shown, r)
	}
	return shown, len(rs) - len(shown)
}

// resourceSessionArgs takes at most one SESSION.
func resourceSessionArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usagef("%s takes at most one SESSION", cmd.CommandPath())
	}
	takesOperands(cmd)
	return nil
}

// sessionOfArgs returns the session args name, or the latest of the
// current directory, with a connection to its host.
func sessionOfArgs(ctx context.Context, args []string) (string, *client.Conn, error) {
	if len(args) == 1 {
		l, err := locateSession(ctx, args[0])
		if err != nil {
			return "", nil, err
		}
		return l.session.SessionID, l.conn, nil
	}
	c, err := open(ctx)
	if err != nil {
		return "", nil, err
	}
	wd, err := os.Getwd()
	if err == nil {
		var here []protocol.Session
		if here, err = sessionsOf(ctx, c, wd); err == nil && len(here) == 0 {
			err = fmt.Errorf("no session of %s: name one, or `agentd new` starts one", wd)
		}
		if err == nil {
			return here[0].SessionID, c, nil
		}
	}
	c.Close()
	return "", nil, err
}

// oneLine shows a command on one line of a table, its control characters
// visible, never acted on.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(tui.Visible(s)), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

func newShellCmd(e *env) *cobra.Command {
	var sandboxMode string
	cmd := &cobra.Command{
		Use:   "shell [SESSION]",
		Short: "Start a shell on a PTY in a session's directory and attach to it (ctrl+\\ detaches).",
		Long: `Start a shell on a PTY in a session's directory and attach to it (ctrl+\ detaches).

The shell runs in the session's sandbox, as the agent's commands do: in a
read-only or workspace session it writes only where they may. --sandbox full
starts it without one, for the command the sandbox refused.`,
		Args: resourceSessionArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sandboxMode != "" && sandboxMode != protocol.SandboxFull {
				return usagef("--sandbox %q: only full (no sandbox) is chosen per shell; the session's sandbox applies otherwise", sandboxMode)
			}
			in, out, err := ptyTerminal(e)
			if err != nil {
				return err
			}
			setup, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			id, c, err := sessionOfArgs(setup, args)
			if err != nil {
				return err
			}
			defer c.Close()
			shell := os.Getenv("SHELL")
			if shell == "" {
				shell = "/bin/sh"
			}
			cols, rows := windowSize(in)
			start := protocol.ResourceStartInput{
				SessionID: id, LaunchID: newID(), Command: "exec " + shellQuote(shell), PTY: true, Cols: cols, Rows: rows, Sandbox: sandboxMode,
			}
			r, err := client.Call(setup, c, protocol.OpRuntimeResourceStart, start)
			if err != nil {
				return err
			}
			return attachPTY(cmd.Context(), e, c, ptyView{in: in, out: out, mode: attachControl}, r)
		},
	}
	cmd.Flags().StringVar(&sandboxMode, "sandbox", "", "full: run this shell without the session's sandbox")
	return cmd
}

// shellQuote quotes s as one word of sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func newPtyCmd(e *env) *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "pty SESSION REF",
		Short: "Attach to a session's PTY: control it when free, else watch it (ctrl+\\ detaches).",
		Args:  exactArgs(2, "SESSION REF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, out, err := ptyTerminal(e)
			if err != nil {
				return err
			}
			setup, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			// The PTY's stream opens on this home's host while the session
			// is looked up, and is used when the session is found there.
			var early *ptyOpening
			l, err := locateSessionWith(setup, args[0], func(c *client.Conn) { early = openPTYStream(setup, c, args[0], args[1], true) })
			if err != nil {
				if early != nil {
					early.close()
				}
				return err
			}
			defer l.conn.Close()
			view := ptyView{in: in, out: out, mode: attachControl, find: true, opening: early}
			if watch {
				view.mode = attachWatch
			}
			return attachPTY(cmd.Context(), e, l.conn, view, protocol.Resource{SessionID: l.session.SessionID, Ref: args[1]})
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "watch only, never taking control")
	return cmd
}

// findPTY returns PTY ref of session sessionID, which must be running.
func findPTY(ctx context.Context, c *client.Conn, sessionID, ref string) (protocol.Resource, error) {
	q, err := client.Call(ctx, c, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: sessionID, Ref: ref})
	if err != nil {
		return protocol.Resource{}, err
	}
	if len(q.Resources) != 1 {
		return protocol.Resource{}, codedError{protocol.CodeNotFound, fmt.Errorf("session %s has no resource %q: `agentd ps %s` lists them", sessionID, ref, sessionID)}
	}
	r := q.Resources[0]
	switch {
	case r.Kind != protocol.ResourcePTY:
		return r, codedError{protocol.CodeInvalidRequest, fmt.Errorf("%s is a %s run, not a PTY: `agentd ps` lists its state", r.Ref, r.Kind)}
	case r.State != protocol.ResourceRunning:
		return r, fmt.Errorf("%s has exited (%s)", r.Ref, exitOf(r))
	}
	return r, nil
}

func exitOf(r protocol.Resource) string {
	if r.ExitCode == nil {
		return "exit status unknown"
	}
	return fmt.Sprintf("exit status %d", *r.ExitCode)
}

// ptyTerminal returns the command's terminal, which attaching to a PTY
// needs on both stdin and stdout.
func ptyTerminal(e *env) (in, out *os.File, err error) {
	in, _ = e.stdin.(*os.File)
	out, _ = e.stdout.(*os.File)
	if in == nil || out == nil || !tui.IsTerminal(in) || !tui.IsTerminal(out) {
		return nil, nil, errors.New("attaching to a PTY needs a terminal on stdin and stdout")
	}
	return in, out, nil
}

// windowSize returns the size of terminal f, or 0, 0 when it has none.
func windowSize(f *os.File) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return min(int(ws.Col), protocol.MaxPTYCols), min(int(ws.Row), protocol.MaxPTYRows)
}

type attachMode int

const (
	attachControl attachMode = iota // take control when free, else watch
	attachWatch                     // never take control
)

// attachPTY shows PTY r on the terminal in raw mode, as viewPTY does, for
// agentd pty and agentd shell: what the person should know is said on
// stderr once the view has ended; when the PTY's program exits, the
// command exits with its code.
func attachPTY(ctx context.Context, e *env, c *client.Conn, view ptyView, r protocol.Resource) error {
	view.inline = true
	for {
		end, err := viewPTY(ctx, c, view, r)
		if err != nil && ctx.Err() == nil && connectionLost(c, err) {
			// The host was replaced, say: the PTY runs on in its worker.
			fmt.Fprintf(e.stderr, "\r\nagentd: connection lost (%v): reconnecting\n", err)
			nc, nr, rerr := reconnectPTY(ctx, r)
			if rerr != nil {
				return rerr
			}
			defer nc.Close()
			c, r, view.find, view.opening = nc, nr, false, nil
			fmt.Fprintln(e.stderr, "agentd: reconnected")
			continue
		}
		switch {
		case err != nil:
			return err
		case end.exited != nil:
			if end.exited.ExitCode == nil {
				return fmt.Errorf("%s exited, its status unknown", end.exited.Ref)
			}
			if *end.exited.ExitCode != 0 {
				return exitCodeError{*end.exited.ExitCode}
			}
		case end.detached:
			how := ""
			if end.watched {
				how = " (watched read-only: another client controls it)"
			}
			fmt.Fprintf(e.stderr, "\r\nagentd: detached from %s%s, which runs on: `agentd pty %s %s` attaches again\n", r.Ref, how, r.SessionID, r.Ref)
		}
		return nil
	}
}

// connectionLost reports whether a view of a PTY on c ended with err
// because its connection to the host ended, or the host handed over to
// another: the PTY may run on.
func connectionLost(c *client.Conn, err error) bool {
	var closed *client.ClosedError
	return c.Err() != nil || errors.As(err, &closed) && closed.Reason == protocol.ClosedHostReplaced
}

// reconnectTimeout bounds how long a view of a PTY tries to reconnect.
const reconnectTimeout = time.Minute

// reconnectPTY connects again to the host serving PTY r's session, once
// one serves it, and finds the PTY there.
func reconnectPTY(ctx context.Context, r protocol.Resource) (*client.Conn, protocol.Resource, error) {
	ctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	dial := dialSession(r.SessionID)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := dial(ctx)
		if err == nil {
			var nr protocol.Resource
			if nr, err = findPTY(ctx, c, r.SessionID, r.Ref); err == nil {
				return c, nr, nil
			}
			c.Close()
			var ie *client.InterruptedError
			if !errors.As(err, &ie) && !errors.Is(err, client.ErrDraining) && !errors.Is(err, client.ErrHostNotReady) {
				return nil, r, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, r, fmt.Errorf("reconnecting to %s: %w (last: %v)", r.Ref, ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// ptyView is where and how viewPTY shows a PTY.
type ptyView struct {
	in, out *os.File // the terminal
	mode    attachMode
	// find, when set, has the view look the PTY up (findPTY) while its
	// stream opens: the resource it is given names the PTY alone.
	find bool
	// opening, when set, is the PTY's stream opened already, on the
	// view's connection or another, which then closes it.
	opening *ptyOpening
	// inline is set for agentd pty and agentd shell, which draw the PTY
	// on the terminal's screen as they find it. A view opened from agentd
	// attach is drawn on the terminal's alternate screen, and gives the
	// terminal's modes back as it found them.
	inline bool
}

// ptyEnd is how a view of a PTY ended: detached from, the PTY exited, or
// neither when its context ended.
type ptyEnd struct {
	detached bool
	exited   *protocol.Resource // the PTY's state once it exited
	// watched is set when the view ended without control: another client
	// held it.
	watched bool
}

// viewPTY shows PTY r on terminal v in raw mode, its screen first, then
// its output, as tmux attach does; while it controls the PTY, what is
// typed goes to it and the terminal's size follows. Ctrl-\ detaches and
// leaves the PTY running. The terminal is given back on every way out.
func viewPTY(ctx context.Context, c *client.Conn, v ptyView, r protocol.Resource) (ptyEnd, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	setup, setupDone := context.WithTimeout(ctx, requestTimeout)
	defer setupDone()
	// The PTY is looked up, its stream opened and its control taken at
	// once, each a round trip or more to its worker. Its screen is drawn
	// as soon as the stream brings it, while control is still being
	// taken; the PTY is sized as the terminal once that has settled. The
	// stream's screen is the one drawn, its output following it with
	// nothing missing, whenever control is taken: the acquire result's
	// screen is not drawn.
	o := v.opening
	if o == nil || o.c != c {
		if o != nil {
			o.close()
		}
		o = openPTYStream(setup, c, r.SessionID, r.Ref, v.find)
	}
	defer o.close()
	// Signals that would leave the terminal raw end the attachment
	// instead; SIGINT and SIGTERM end ctx already. Asked for while the
	// stream opens: each takes a moment the screen need not wait for.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(hup)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	// Control is asked for once the first screen is written (or the view
	// ends before one): the worker draws a screen for the answer, which
	// would otherwise share the two processors with the first screen's
	// way to the terminal. Keys are read only once it is answered.
	var acquiring sync.WaitGroup
	var ctl *client.Controller
	var ctlErr error
	shown := make(chan struct{})
	if v.mode == attachControl {
		acquiring.Go(func() {
			select {
			case <-shown:
			case <-setup.Done():
			}
			ctl, ctlErr = c.AcquirePTY(setup, r.SessionID, r.Ref)
		})
	}
	o.wg.Wait()
	a := &attachment{c: c, res: r, mayTake: v.mode == attachControl, stream: o.stream, out: v.out, wake: make(chan struct{}, 1), keyed: make(chan struct{}, 1), back: make(chan struct{}, 1),
		shown: sync.OnceFunc(func() { close(shown) })}
	a.idle = sync.NewCond(&a.mu)
	// The host's stream is read until a stream of the PTY's worker takes
	// its place (goDirect).
	var hostDone context.CancelFunc
	a.hostCtx, hostDone = context.WithCancel(ctx)
	defer hostDone()
	a.hostDone = hostDone
	defer func() {
		acquiring.Wait()
		if ctl := a.controller(); ctl != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
			defer rcancel()
			ctl.Release(rctx) // an exited PTY's control is gone already
		}
	}()
	settle := func() {
		acquiring.Wait()
		a.mu.Lock()
		a.ctl = ctl
		a.mu.Unlock()
	}
	switch {
	case o.findErr != nil:
		a.shown()
		settle()
		return ptyEnd{}, o.findErr
	case o.watchErr != nil:
		a.shown()
		settle()
		return ptyEnd{}, o.watchErr
	}
	if v.find {
		a.res = o.found
	}
	a.watch = newPTYWatch(v.out, a.res.Ref, a.res.Cols, a.res.Rows)

	raw, err := makeRaw(v.in)
	if err != nil {
		a.shown()
		settle()
		return ptyEnd{}, err
	}
	defer raw.restore()
	if !v.inline {
		v.out.WriteString(enterAltScreen)
	}
	var wg sync.WaitGroup
	ended := make(chan error, 3)
	wg.Go(func() { ended <- a.show(ctx) })
	// The screen the stream brought is written first, ahead of the rest
	// of the setup.
	runtime.Gosched()
	settle()
	var end error
	switch {
	case ctl != nil:
		a.watch.controlled()
		wg.Go(func() { a.goDirect(ctx, ctl) })
	case ctlErr != nil && !errors.Is(ctlErr, client.ErrOperationConflict):
		end = ctlErr
	default: // control refused, or not asked for: watched read-only
		mark := ""
		if ctlErr != nil {
			leave := "returns"
			if v.inline {
				leave = "detaches"
			}
			mark = fmt.Sprintf("agentd: another client controls %s: watching it read-only until it is free and a key is typed (ctrl+\\ %s)", r.Ref, leave)
		}
		cols, rows := windowSize(v.in)
		end = a.watch.readOnly(mark, cols, rows)
	}
	if end == nil {
		setupDone()
		if v.inline {
			// From here on, agentd shell and agentd pty hand each key and
			// each piece of the PTY's output from goroutine to goroutine
			// (keyInput's reader, the connection's, the view's): on one
			// processor the goroutine readied runs on the thread that
			// readied it, where two wake a thread for each hand-over. The
			// echo bench measured half the context switches and 40% less
			// CPU in the client (docs/bench-resources.md).
			oneProcessor()
		}
		a.resize(windowSize(v.in))
		read, keys, keysDone := keyInput(ctx, v.in)
		defer keysDone()
		a.keys, a.termOut = keys, v.out
		wg.Go(func() { ended <- a.readKeys(ctx, v.in, read) })
		if a.mayTake {
			wg.Go(func() { ended <- a.send(ctx) })
		}
	}
	for end == nil {
		select {
		case end = <-ended:
		case <-hup:
			end = context.Canceled
		case <-ctx.Done():
			end = ctx.Err()
		case <-winch:
			cols, rows := windowSize(v.in)
			if err := a.watch.resized(cols, rows); err != nil {
				end = err
			}
			a.resize(cols, rows)
		}
	}
	cancel()
	wg.Wait() // the keys typed with ctrl+\ before it are sent
	a.mu.Lock()
	if a.direct != nil {
		a.direct.Close()
	}
	a.mu.Unlock()
	// The modes the PTY's program turned on (mouse reporting, bracketed
	// paste, a hidden cursor) are the PTY's, not the terminal's after it.
	if v.inline {
		v.out.WriteString(viewModesReset)
	} else {
		v.out.WriteString(viewModesReset + leaveAltScreen)
	}
	raw.restore()
	watched := a.controller() == nil
	var exited errExited
	switch {
	case errors.As(end, &exited):
		return ptyEnd{exited: &exited.r, watched: watched}, nil
	case errors.Is(end, errDetached):
		return ptyEnd{detached: true, watched: watched}, nil
	case errors.Is(end, context.Canceled):
		return ptyEnd{watched: watched}, nil
	}
	return ptyEnd{}, end
}

// ptyOpening is a PTY's stream opening on one connection, the PTY looked
// up beside it when asked.
type ptyOpening struct {
	c  *client.Conn // constant
	wg sync.WaitGroup
	// Set once wg is done.
	found             protocol.Resource
	stream            *client.PTYStream
	findErr, watchErr error
}

// openPTYStream starts opening a stream of PTY ref of session (an id or a
// unique prefix of one) on c, and looking the PTY up when find is set.
func openPTYStream(ctx context.Context, c *client.Conn, session, ref string, find bool) *ptyOpening {
	o := &ptyOpening{c: c}
	if find {
		o.wg.Go(func() { o.found, o.findErr = findPTY(ctx, c, session, ref) })
	}
	o.wg.Go(func() { o.stream, o.watchErr = c.WatchPTY(ctx, session, ref) })
	return o
}

// close waits for the opening to end and closes the stream it opened.
func (o *ptyOpening) close() {
	o.wg.Wait()
	if o.stream != nil {
		o.stream.Close()
	}
}

// What a view opened from agentd attach writes to the terminal around the
// PTY's screen.
const (
	enterAltScreen = "\x1b[?1049h"
	leaveAltScreen = "\x1b[?1049l"
	// viewModesReset turns off the modes a PTY's program may have turned
	// on (mouse reports, bracketed paste, application keys, a hidden
	// cursor, colours), which would otherwise reach agentd attach.
	viewModesReset = "\x1b[0m\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1004l\x1b[?1l\x1b>\x1b[?25h\x1b[<u"
)

// errDetached ends an attachment at Ctrl-\.
var errDetached = errors.New("detached")

// errExited ends an attachment whose PTY exited.
type errExited struct{ r protocol.Resource }

func (e errExited) Error() string { return e.r.Ref + " exited" }

// attachment is one terminal attached to one PTY.
type attachment struct {
	c       *client.Conn      // constant
	res     protocol.Resource // constant
	mayTake bool              // constant: control may be taken
	stream  *client.PTYStream // constant: the host's stream the view opened with
	out     io.Writer         // constant
	shown   func()            // constant: called once the PTY's first output is written, or show has ended
	// hostCtx is what the host's stream is read under; hostDone ends it
	// once a stream of the PTY's worker is there to read instead. Each
	// return to the host's stream makes them anew. Guarded by mu.
	hostCtx  context.Context
	hostDone context.CancelFunc
	// watch is where the terminal is written: the PTY's output passes
	// through it, and once control is refused, or not asked for, it draws
	// the read-only view. Constant after setup.
	watch *ptyWatch

	mu         sync.Mutex
	ctl        *client.Controller // guarded by mu: nil while watching
	typed      []byte             // guarded by mu: typed, not sent yet
	cols, rows int                // guarded by mu: a size not sent yet, or 0
	sending    bool               // guarded by mu: a goroutine is making control calls
	lost       bool               // guarded by mu: a call conflicted; no more are made
	direct     *client.PTYStream  // guarded by mu: the PTY's stream on its worker, once opened
	keyed      chan struct{}      // signalled as keys are sent
	back       chan struct{}      // signalled as the view goes back to the host's stream
	wake       chan struct{}      // a size waits for send
	idle       *sync.Cond         // on mu: broadcast when sending ends
	park       *keyPark           // guarded by mu: readKeys is asked to stop reading, or nil

	// keys are the terminal's keys as read, on a description of the
	// view's own, and termOut the terminal written to: lendTerminal lends
	// the PTY's worker descriptions of both. Keys is nil when the terminal
	// could not be opened again; both are constant once the keys are read.
	keys    *termKeys
	termOut *os.File
}

// show writes the PTY's screen and output to the terminal, through its
// watch, until the PTY exits. The first screen is written as soon as it
// comes, whether or not control is taken yet.
//
// Once control is taken, the PTY is read on its worker instead (goDirect),
// its screen first, and the terminal is lent to the worker, which reads
// the keys and draws the PTY on it (lendTerminal); when the terminal is
// given back or that stream ends (the control ended, or this reader fell
// behind), a stream of the host takes its place again, its screen first
// too.
func (a *attachment) show(ctx context.Context) error {
	defer a.shown()
	a.mu.Lock()
	stream, readCtx := a.stream, a.hostCtx
	a.mu.Unlock()
	for {
		ev, err := stream.Next(readCtx)
		if err != nil && ctx.Err() == nil {
			a.mu.Lock()
			direct := a.direct
			a.mu.Unlock()
			switch {
			case direct != nil && stream != direct:
				// The host's stream stays, for the PTY's state and the
				// stream's end (a host replaced says so there), without
				// the output the worker's carries.
				if err := stream.Pause(ctx); err != nil {
					return err
				}
				reason, lent := a.lendTerminal(ctx, direct)
				switch {
				case !lent:
					// Read through the worker's stream.
					stream, readCtx = direct, ctx
					continue
				case reason == protocol.TerminalDetached:
					return errDetached
				case ctx.Err() != nil:
					return ctx.Err()
				}
				// Given back: on through the host, as when the
				// worker's stream ends.
				stream, readCtx = a.backToHost(ctx, direct)
				continue
			case direct != nil:
				stream, readCtx = a.backToHost(ctx, direct)
				continue
			}
		}
		if err != nil {
			return err
		}
		if ev.Resource != nil && ev.Resource.State == protocol.ResourceExited {
			return errExited{*ev.Resource}
		}
		if ev.Resource != nil {
			if err := a.watch.ptyResized(ev.Resource.Cols, ev.Resource.Rows); err != nil {
				return err
			}
		}
		if len(ev.Data) == 0 {
			continue
		}
		if err := a.watch.output(ev.Data, ev.Screen); err != nil {
			return err
		}
		a.shown()
	}
}

// backToHost closes the worker's stream direct, which ended, and
// returns the host's, resumed from the PTY's screen, with the context to
// read it under until goDirect finds the way to the worker again. A host
// going away says why on its stream.
func (a *attachment) backToHost(ctx context.Context, direct *client.PTYStream) (*client.PTYStream, context.Context) {
	direct.Close()
	a.stream.Resume(ctx)
	a.mu.Lock()
	a.direct = nil
	a.hostCtx, a.hostDone = context.WithCancel(ctx)
	readCtx := a.hostCtx
	a.mu.Unlock()
	notify(a.back)
	return a.stream, readCtx
}

// notify signals c, a channel of one, unless it is signalled already.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// directRest is how long a view that went back to the host's stream waits
// before it takes the way to the PTY's worker again, at the next key: the
// flood that made its terminal too slow may go on, and each new way
// starts with the PTY's screen drawn whole.
const directRest = time.Second

// goDirect moves the controller's calls and the PTY's output to a
// connection to the PTY's worker, taking the host out of the way of a
// key's echo. Where the host gives no way there, they stay with the host.
//
// It waits for the first keys typed: a view that only shows the PTY needs
// no connection of its own, and its first screen shares the machine with
// nothing more. When the view goes back to the host's stream (the
// terminal fell behind a flood, say) it takes the way again at the first
// key typed after directRest, for as long as the control lasts.
func (a *attachment) goDirect(ctx context.Context, ctl *client.Controller) {
	for {
		select {
		case <-a.keyed:
		case <-ctx.Done():
			return
		}
		dctx, cancel := context.WithTimeout(ctx, requestTimeout)
		ds, err := ctl.Direct(dctx)
		cancel()
		if err != nil {
			return
		}
		a.mu.Lock()
		if ctx.Err() != nil {
			a.mu.Unlock()
			ds.Close()
			return
		}
		a.direct = ds
		hostDone := a.hostDone
		a.mu.Unlock()
		hostDone()
		select {
		case <-a.back:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(directRest):
		case <-ctx.Done():
			return
		}
		select {
		case <-a.keyed: // typed during the rest
		default:
		}
	}
}

// lendTerminal lends the PTY's worker the terminal on its stream ds
// (client.PTYStream.LendTerminal) and returns why it was given back; lent
// is false when it was not lent, and the worker's stream is to be read
// instead. The keys are not read here meanwhile: those read before are
// sent first, so the PTY has them before the worker's.
func (a *attachment) lendTerminal(ctx context.Context, ds *client.PTYStream) (reason string, lent bool) {
	if a.keys == nil || a.termOut == nil {
		return "", false
	}
	resume, parked := a.parkKeys(ctx)
	defer resume()
	if !parked {
		return "", false
	}
	// Descriptions of the loan's own, outside the runtime's poller: while
	// the worker reads and writes the terminal, no key typed and no
	// output drawn wakes this process (the worker makes them
	// nonblocking, which their descriptions keep, not the terminal).
	in, err := openTerminal(a.keys.in, os.O_RDONLY)
	if err != nil {
		return "", false
	}
	defer in.Close()
	out, err := openTerminal(a.termOut, os.O_WRONLY)
	if err != nil {
		return "", false
	}
	defer out.Close()
	reason, err = ds.LendTerminal(ctx, in, out, string(rune(detachKey)))
	if err != nil {
		return "", false
	}
	return reason, true
}

// keyPark is a request that readKeys stop reading the terminal.
type keyPark struct {
	stopped chan struct{} // closed by readKeys once it reads no more
	resume  chan struct{} // closed once it may read again
}

// parkKeys has readKeys stop reading the terminal and returns once it has
// stopped and every key it read has been sent, parked true; then until
// resume is called. parked is false when ctx ended first.
func (a *attachment) parkKeys(ctx context.Context) (resume func(), parked bool) {
	p := &keyPark{stopped: make(chan struct{}), resume: make(chan struct{})}
	a.mu.Lock()
	a.park = p
	a.mu.Unlock()
	resume = func() {
		a.mu.Lock()
		a.park = nil
		a.mu.Unlock()
		close(p.resume)
	}
	a.keys.interrupt()
	select {
	case <-p.stopped:
	case <-ctx.Done():
		return resume, false
	}
	a.mu.Lock()
	for a.sending {
		a.idle.Wait()
	}
	lost := a.lost
	a.mu.Unlock()
	return resume, !lost
}

// parked waits, when parkKeys asked readKeys to stop, until it may read
// again, and reports whether it was asked.
func (a *attachment) parked(ctx context.Context) bool {
	a.mu.Lock()
	p := a.park
	a.mu.Unlock()
	if p == nil {
		return false
	}
	// Closed while parked: a description in the runtime's poller would
	// wake this process at each key typed and each piece of output
	// drawn, whoever reads and writes the terminal.
	a.keys.release()
	close(p.stopped)
	select {
	case <-p.resume:
	case <-ctx.Done():
	}
	a.keys.reopen()
	return true
}

// readKeys reads the terminal's keys with read until Ctrl-\, passing
// them on to be sent while the PTY is controlled.
func (a *attachment) readKeys(ctx context.Context, in *os.File, read func([]byte) (int, error)) error {
	buf := make([]byte, 4<<10)
	for {
		m, err := read(buf)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded) && a.parked(ctx):
			continue
		case err != nil:
			return err
		case m == 0:
			continue
		}
		keys := buf[:m]
		i := strings.IndexByte(string(keys), detachKey)
		if i >= 0 {
			keys = keys[:i]
		}
		switch {
		case len(keys) > 0 && a.controlFor(ctx, in) != nil:
			a.mu.Lock()
			a.typed = append(a.typed, keys...)
			a.mu.Unlock()
			notify(a.keyed)
			if err := a.sendPending(ctx); err != nil {
				return err
			}
		case len(keys) > 0:
			// Said, not dropped without a word.
			why := "read-only: another client controls this PTY (ctrl+\\ detaches)"
			if !a.mayTake {
				why = "read-only: watching only, keys are not sent (ctrl+\\ detaches)"
			}
			if err := a.watch.dropped(why); err != nil {
				return err
			}
		}
		if i >= 0 {
			return errDetached
		}
	}
}

// keyInput returns how the keys of terminal in are read, until ctx
// ends, the keys as read on a description of their own (nil when there
// is none), and what to call once done.
//
// The terminal is opened again, on a file description of its own in
// nonblocking mode, and read through the Go runtime's poller: a key wakes
// the goroutine that sends it on the thread that takes the PTY's echo
// too, where a read blocked in poll(2) holds a thread of its own. The
// terminal's own description, shared with the shell that started agentd,
// stays as it is. Where the terminal cannot be opened again (another
// user's), it is polled a while at a time, so that ctx ending is seen.
func keyInput(ctx context.Context, in *os.File) (read func([]byte) (int, error), keys *termKeys, done func()) {
	f, err := openTerminal(in, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		fd := int(in.Fd())
		return func(p []byte) (int, error) { return pollRead(ctx, fd, p) }, nil, func() {}
	}
	keys = &termKeys{in: in, f: f}
	stop := context.AfterFunc(ctx, keys.end)
	return keys.read, keys, func() { stop(); keys.end(); keys.release() }
}

// termKeys are a terminal's keys, read on a description of their own
// that is closed while another process reads the terminal.
type termKeys struct {
	in *os.File // constant: the terminal

	mu          sync.Mutex
	f           *os.File // guarded by mu: the description read, nil while released
	interrupted bool     // guarded by mu: a read is to end, on the description open now or next
	ended       bool     // guarded by mu: no key is read any more
}

// read reads keys into p; it reads no more once ended.
func (k *termKeys) read(p []byte) (int, error) {
	k.mu.Lock()
	f := k.f
	k.mu.Unlock()
	if f == nil {
		return 0, io.EOF // the terminal could not be opened again
	}
	n, err := f.Read(p)
	if errors.Is(err, syscall.EIO) {
		err = io.EOF // hung up
	}
	return n, err
}

// interrupt ends the read under way, or the next, with
// os.ErrDeadlineExceeded, until the description is released.
func (k *termKeys) interrupt() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.interrupted = true
	if k.f != nil {
		k.f.SetReadDeadline(time.Now())
	}
}

// end ends the reading of keys: the read under way, and any after.
func (k *termKeys) end() {
	k.mu.Lock()
	k.ended = true
	k.mu.Unlock()
	k.interrupt()
}

// release closes the description read; called by its reader, between
// reads.
func (k *termKeys) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.interrupted = false
	if k.f != nil {
		k.f.Close()
		k.f = nil
	}
}

// reopen opens a description again after release, unless ended; called
// by its reader, between reads. Reads fail once it could not.
func (k *termKeys) reopen() {
	f, err := openTerminal(k.in, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		f.Close()
		return
	}
	k.f = f
	if k.interrupted {
		f.SetReadDeadline(time.Now())
	}
}

// openTerminal opens terminal f again, on a file description of its
// own, for flag (os.O_RDONLY or os.O_WRONLY, with syscall.O_NONBLOCK to
// read or write it through the runtime's poller; without it, the
// description is left out of the poller).
func openTerminal(f *os.File, flag int) (*os.File, error) {
	name := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if flag&syscall.O_NONBLOCK != 0 {
		return os.OpenFile(name, flag|syscall.O_NOCTTY, 0)
	}
	// os.OpenFile would make the description nonblocking and put it in
	// the poller; os.NewFile leaves a blocking one out.
	fd, err := unix.Open(name, flag|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// pollRead reads what terminal fd has into p, once some is there; it
// polls a while at a time, so that ctx ending is seen soon.
func pollRead(ctx context.Context, fd int, p []byte) (int, error) {
	for ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 50)
		switch {
		case errors.Is(err, unix.EINTR) || n == 0:
			continue
		case err != nil:
			return 0, err
		case fds[0].Revents&unix.POLLIN == 0:
			return 0, io.EOF // hung up
		}
		m, err := unix.Read(fd, p)
		switch {
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return 0, err
		case m == 0:
			return 0, io.EOF
		}
		return m, nil
	}
	return 0, ctx.Err()
}

func (a *attachment) controller() *client.Controller {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ctl
}

// controlFor returns the PTY's controller to send keys with: the one held,
// or, when control may be taken and no other client holds it any more, a
// new one, sized as terminal in. Nil: the keys are not sent.
func (a *attachment) controlFor(ctx context.Context, in *os.File) *client.Controller {
	if ctl := a.controller(); ctl != nil || !a.mayTake {
		return ctl
	}
	actx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ctl, err := a.c.AcquirePTY(actx, a.res.SessionID, a.res.Ref)
	if err != nil {
		return nil // still controlled by another, or gone: show says which
	}
	cols, rows := windowSize(in)
	a.mu.Lock()
	a.ctl, a.cols, a.rows = ctl, cols, rows
	a.mu.Unlock()
	a.watch.controlled()
	return ctl
}

// resize notes the terminal's new size, for send to send.
func (a *attachment) resize(cols, rows int) {
	if a.controller() == nil || cols == 0 || rows == 0 {
		return
	}
	a.mu.Lock()
	a.cols, a.rows = cols, rows
	a.mu.Unlock()
	a.poke()
}

func (a *attachment) poke() { notify(a.wake) }

// send sends the terminal's new sizes, which the main loop notes.
func (a *attachment) send(ctx context.Context) error {
	for {
		select {
		case <-a.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := a.sendPending(ctx); err != nil {
			return err
		}
	}
}

// sendPending makes control calls, one at a time, until what was typed
// and the latest size are sent, unless another goroutine makes them
// already: that one sends what was added once its call returns. Keys thus
// go out from the goroutine that read them, with no hand-over to wait
// for, and each call carries all that was typed while the one before was
// in flight.
func (a *attachment) sendPending(ctx context.Context) error {
	a.mu.Lock()
	if a.sending {
		a.mu.Unlock()
		return nil
	}
	a.sending = true
	for {
		data := a.typed[:min(len(a.typed), protocol.MaxControlDataBytes)]
		cols, rows := a.cols, a.rows
		a.typed = a.typed[len(data):]
		a.cols, a.rows = 0, 0
		if a.lost || len(data) == 0 && cols == 0 {
			a.sending = false
			a.idle.Broadcast()
			a.mu.Unlock()
			return nil
		}
		ctl := a.ctl
		a.mu.Unlock()
		// The call's own deadline, not ctx: keys typed before a detach
		// still reach the PTY.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		err := ctl.Control(cctx, data, cols, rows)
		cancel()
		a.mu.Lock()
		switch {
		case errors.Is(err, client.ErrOperationConflict):
			a.lost = true // the PTY exited, or control was lost: show says which
		case err != nil:
			a.sending = false
			a.idle.Broadcast()
			a.mu.Unlock()
			return fmt.Errorf("sending keys: %w", err)
		}
	}
}

// rawTerminal is a terminal put in raw mode, and how to give it back.
type rawTerminal struct {
	fd   int
	old  *unix.Termios
	once sync.Once
}

// makeRaw puts terminal f in raw mode: keys arrive one by one, unechoed,
// Ctrl-C and Ctrl-Z as bytes for the PTY.
func makeRaw(f *os.File) (*rawTerminal, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return &rawTerminal{fd: fd, old: old}, nil
}

func (r *rawTerminal) restore() {
	r.once.Do(func() { unix.IoctlSetTermios(r.fd, unix.TCSETS, r.old) })
}
