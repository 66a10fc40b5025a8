package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
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

// errTurnFailed is returned when the turn ended in any way but completed.
type errTurnFailed struct{ turn protocol.TurnSnapshot }

func (e errTurnFailed) Error() string {
	if e.turn.Error != "" {
		return fmt.Sprintf("turn %s: %s", e.turn.Status, tui.Visible(e.turn.Error))
	}
	return "turn " + e.turn.Status
}

type runFlags struct {
	session, cwd, title, model, thinking, approve, file string
	asJSON                                              bool
	// queue and steer send the prompt to a session whose turn runs: to
	// run after it, or into it at its next model call.
	queue, steer bool
	// resume continues the latest session of the directory (--continue).
	resume bool
	// detach starts the turn and returns without streaming it.
	detach bool
	// wait is how long a call waiting for approval is waited for off a
	// terminal; unset, it is refused at once. shifted is set when its
	// duration came as the first argument (--wait-approval 5m PROMPT).
	wait    waitFlag
	shifted bool
	// sandbox is a new session's sandbox.
	sandbox sandboxFlags
	// plugins are the session's plugin packages' directories, absolute
	// once the arguments are checked.
	plugins []string
}

// waitFlag is --wait-approval's value: set when given; d is its limit, 0
// for none.
type waitFlag struct {
	set bool
	d   time.Duration
}

// waitForever is --wait-approval's value given without a duration.
const waitForever = "forever"

func (w *waitFlag) String() string {
	switch {
	case !w.set:
		return ""
	case w.d == 0:
		return waitForever
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == waitForever {
		*w = waitFlag{set: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 10m, or no value to wait without limit")
	}
	*w = waitFlag{set: true, d: d}
	return nil
}

func (w *waitFlag) Type() string { return "DURATION" }

// placement is where the prompt goes when a turn runs; empty for a turn of
// its own, refused while another runs.
func (f runFlags) placement() string {
	switch {
	case f.queue:
		return protocol.PlacementNextTurn
	case f.steer:
		return protocol.PlacementSteering
	}
	return ""
}

// promptRoom is what a turn.start request needs beside its prompt: the
// prompt, JSON-encoded, must fit in one message with it.
const promptRoom = 4 << 10

const runExamples = `  agentd run 'fix the failing test'             a new session of this directory
  agentd run -c 'and now the docs'              continue this directory's latest session
  agentd run --session 3kq 'go on'              continue a session (an id or a unique prefix)
  agentd run --file task.md                     the prompt from a file
  echo 'summarise README.md' | agentd run       the prompt from stdin (also: agentd run -)
  agentd run -d --approve all 'run the tests'   start the turn and return; come back to it
                                                with agentd attach ID or agentd log -f ID`

func newRunCmd(e *env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [PROMPT | -]",
		Short: "Run one turn of a session's agent and stream it until it ends.",
		Long: `Run one turn of a session's agent and stream it until it ends.

The prompt is the arguments, or stdin with - or when stdin is a pipe, or a
file with --file. A prompt is at most about 768 KiB: it must fit, encoded,
in one message of the protocol.

Without --session or -c the turn runs in a new session of the current
directory (or --cwd). On a terminal a tool call that changes files or runs
commands waits for y (allow), n (deny) or a (allow that tool for the rest of
the session) under the default policy, ask; off a terminal the default is
read-only, which refuses those calls. A session keeps its policy until
--approve changes it. Off a terminal nobody can answer here, so a call
that waits for approval is refused at once, unless --wait-approval says to
wait (without limit, or --wait-approval=10m) for an answer from agentd
answer or agentd attach.

Ctrl-C interrupts the turn; a second Ctrl-C leaves at once. SIGTERM leaves
at once and the turn runs on. With --detach (-d) the command starts the turn
and returns with the session's id: come back to it with agentd attach ID, or
agentd log -f ID.

Exit status: 0 when the turn completes, 1 when it fails or is stopped, 2 for
a command line that is wrong.`,
		Example: runExamples,
		Args: func(cmd *cobra.Command, args []string) error {
			switch f.approve {
			case "", protocol.ApprovalAsk, protocol.ApprovalAll, protocol.ApprovalReadOnly:
			default:
				return usagef("--approve %q: want ask, all or read-only", f.approve)
			}
			switch f.thinking {
			case "", "off", "low", "medium", "high":
			default:
				return usagef("--thinking %q: want off, low, medium or high", f.thinking)
			}
			// --wait-approval takes its duration after =, or as the
			// first word when more follow: --wait-approval 10m PROMPT.
			if f.wait.set && f.wait.d == 0 && len(args) > 1 {
				if d, err := time.ParseDuration(args[0]); err == nil && d > 0 {
					f.wait.d, f.shifted = d, true
					args = args[1:]
				}
			}
			if f.wait.set && f.detach {
				return usagef("--wait-approval waits while the turn streams; with --detach approvals wait for agentd answer or agentd attach")
			}
			if f.model != "" && !strings.Contains(strings.Trim(f.model, "/"), "/") {
				return usagef("--model %q: provider requires a model (provider/model)", f.model)
			}
			session := cmd.Flags().Changed("session")
			switch {
			case session && strings.TrimSpace(f.session) == "":
				return usagef("--session %q: want a session id or a unique prefix of one", f.session)
			case session && f.resume:
				return usagef("--session and --continue: choose one")
			case session && f.cwd != "":
				return usagef("--cwd is the directory of a new session; the session of --session keeps its own")
			case f.queue && f.steer:
				return usagef("--queue and --steer: choose one")
			case (f.queue || f.steer) && !session && !f.resume:
				return usagef("--queue and --steer need --session or --continue")
			case (f.queue || f.steer) && f.approve != "":
				return usagef("--approve starts a turn of its own; with --queue or --steer the session's policy applies")
			case (session || f.resume) && f.sandbox.set():
				return usagef("--sandbox and --network choose a new session's sandbox; a session keeps its own")
			case f.file != "" && len(args) > 0:
				return usagef("--file and a prompt argument: choose one")
			case len(args) > 1 && slices.Contains(args, "-"):
				return usagef("- reads the prompt from stdin and takes no other words")
			}
			dirs, err := pluginDirs(f.plugins)
			if err != nil {
				return err
			}
			f.plugins = dirs
			if !session && !f.resume {
				return f.sandbox.check()
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.shifted {
				args = args[1:]
			}
			prompt, err := readPrompt(e, f, args)
			if err != nil {
				return err
			}
			return runTurn(cmd.Context(), e, f, prompt)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.session, "session", "", "continue this session (an id or a unique prefix)")
	fl.BoolVarP(&f.resume, "continue", "c", false, "continue the latest session of the current directory (or --cwd)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory of a new session (default: the current directory)")
	fl.StringVar(&f.title, "title", "", "title of a new session; with --session or -c, the session's new title")
	fl.StringVar(&f.model, "model", "", "model, provider/model (default: the last selected)")
	fl.StringVar(&f.thinking, "thinking", "", "thinking level: off, low, medium or high")
	fl.StringVar(&f.approve, "approve", "", "which tool calls wait for you: ask, all or read-only (a new session's default: ask on a terminal, read-only otherwise; a session keeps its policy until this changes it)")
	fl.Var(&f.wait, "wait-approval", "off a terminal, wait this long (no value: without limit) for a call waiting for approval to be answered with agentd answer or agentd attach, instead of refusing it")
	fl.Lookup("wait-approval").NoOptDefVal = waitForever
	fl.StringVar(&f.file, "file", "", "read the prompt from this file")
	f.sandbox.add(fl)
	addPluginFlag(fl, &f.plugins)
	fl.BoolVar(&f.asJSON, "json", false, "print the event stream as JSON lines, its bytes exact")
	fl.BoolVarP(&f.detach, "detach", "d", false, "start the turn and return with the session id (agentd attach ID or agentd log -f ID to come back)")
	fl.BoolVar(&f.queue, "queue", false, "if a turn runs, run the prompt after it (and stream that turn)")
	fl.BoolVar(&f.steer, "steer", false, "if a turn runs, send the prompt into it before its next model call (and stream that turn)")
	return cmd
}

// readPrompt reads the prompt from the arguments, stdin or --file, and
// checks that it fits in a request.
func readPrompt(e *env, f runFlags, args []string) (string, error) {
	var text, from string
	switch {
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return "", fmt.Errorf("--file: %w", err)
		}
		text, from = string(b), "--file "+f.file
	case len(args) == 1 && args[0] == "-", len(args) == 0 && !tui.IsTerminal(e.stdin):
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return "", fmt.Errorf("reading the prompt from stdin: %w", err)
		}
		text, from = string(b), "stdin"
	case len(args) == 0:
		return "", usagef("run needs a prompt: as arguments, from stdin (- or a pipe), or --file F")
	default:
		text, from = strings.Join(args, " "), "the prompt"
	}
	if from != "the prompt" {
		text = strings.TrimRight(text, "\r\n")
	}
	if strings.TrimSpace(text) == "" {
		if from == "the prompt" {
			return "", usagef("run needs a prompt")
		}
		return "", usagef("run needs a prompt: %s is empty", from)
	}
	encoded, _ := json.Marshal(text)
	if len(encoded)+promptRoom > protocol.MaxMessageBytes {
		return "", usagef("the prompt (%s) is %s; a prompt must fit, encoded, in one 768 KiB message (at most about %s of plain text)",
			from, sizeOf(len(text)), sizeOf(protocol.MaxMessageBytes-promptRoom-2))
	}
	return text, nil
}

// sizeOf says n bytes for people.
func sizeOf(n int) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
}

// terminalOf returns f as a terminal's file, or nil when it is not one.
func terminalOf(f any) *os.File {
	if file, ok := f.(*os.File); ok && tui.IsTerminal(file) {
		return file
	}
	return nil
}

// runSetup is what runTurn found or made before the turn starts.
type runSetup struct {
	c       *client.Conn
	sess    protocol.Session
	created bool // the session is new: a failed start removes it
}

// setupSession finds the session the prompt goes to, or creates one, and
// applies the flags that change it.
func setupSession(ctx context.Context, f runFlags, approve string) (s runSetup, err error) {
	switch {
	case f.session != "":
		l, err := locateSession(ctx, f.session)
		if err != nil {
			return s, err
		}
		s.c, s.sess = l.conn, l.session
	case f.resume:
		if s.c, err = open(ctx); err != nil {
			return s, err
		}
		dir := f.cwd
		if dir == "" {
			if dir, err = os.Getwd(); err != nil {
				s.c.Close()
				return s, err
			}
		}
		dir, _ = filepath.Abs(dir)
		here, err := sessionsOf(ctx, s.c, dir)
		if err == nil && len(here) == 0 {
			if real, rerr := filepath.EvalSymlinks(dir); rerr == nil && real != dir {
				here, err = sessionsOf(ctx, s.c, real)
			}
		}
		if err != nil {
			s.c.Close()
			return s, err
		}
		if len(here) == 0 {
			s.c.Close()
			return s, fmt.Errorf("no session of %s to continue: run without --continue to start one", dir)
		}
		s.sess = here[0]
	default:
		if s.c, err = open(ctx); err != nil {
			return s, err
		}
		s.sess, err = createSession(ctx, s.c, protocol.SessionCreateInput{
			Cwd: f.cwd, Title: f.title, Model: f.model, Approval: approve, Sandbox: f.sandbox.mode, Network: f.sandbox.network, Plugins: f.plugins,
		})
		if err != nil {
			s.c.Close()
			return s, err
		}
		s.created = true
		return s, nil
	}
	defer func() {
		if err != nil {
			s.c.Close()
		}
	}()
	if f.title != "" {
		s.sess, err = client.Call(ctx, s.c, protocol.OpSessionRename, protocol.SessionRenameInput{SessionID: s.sess.SessionID, Title: f.title})
		if err != nil {
			return s, err
		}
	}
	if len(f.plugins) > 0 {
		if s.sess, err = client.Call(ctx, s.c, protocol.OpSessionPluginsSet, protocol.SessionPluginsSetInput{SessionID: s.sess.SessionID, Plugins: f.plugins}); err != nil {
			return s, err
		}
	}
	if f.model != "" {
		if _, err := client.Call(ctx, s.c, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: s.sess.SessionID, Model: f.model}); err != nil {
			return s, err
		}
		s.sess.Model = f.model
	}
	return s, nil
}

// removeFailed removes a session this command created for a turn that did
// not start, so a failed start leaves nothing behind.
func removeFailed(c *client.Conn, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	client.Call(ctx, c, protocol.OpSessionRemove, protocol.SessionRef{SessionID: id})
}

func runTurn(ctx context.Context, e *env, f runFlags, prompt string) (err error) {
	onTerminal := tui.IsTerminal(e.stdin) && tui.IsTerminal(e.stdout) && !f.asJSON
	// A new session's policy: ask where a person can answer, else
	// read-only. A session that exists keeps its own unless --approve says.
	approve := f.approve
	if approve == "" && f.session == "" && !f.resume {
		approve = protocol.ApprovalReadOnly
		if onTerminal {
			approve = protocol.ApprovalAsk
		}
	}
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := setupSession(setup, f, approve)
	if err != nil {
		return err
	}
	c, sess := s.c, s.sess
	defer c.Close()
	warnUnsandboxed(e.stderr, paletteFor(e.stderr), sess)
	started := false
	if s.created {
		defer func() {
			if !started {
				removeFailed(c, sess.SessionID)
			}
		}()
	}
	// A prompt typed as /name args is the session's prompt command.
	if prompt, err = expandCommand(setup, c, sess.SessionID, prompt); err != nil {
		return err
	}
	if f.thinking != "" {
		if _, err := client.Call(setup, c, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: sess.SessionID, Level: f.thinking}); err != nil {
			return err
		}
	}
	p := &printer{e: e, asJSON: f.asJSON, c: c, session: sess.SessionID, out: &promptOut{w: e.stdout}, asked: map[string]bool{}, wait: f.wait, waits: map[string]context.CancelFunc{}}
	if onTerminal {
		p.keys = terminalOf(e.stdin)
	}
	if f.detach {
		if err := p.begin(setup, f, approve, prompt); err != nil {
			return err
		}
		started = true
		return p.detached(sess)
	}
	stream, err := follow(setup, sess.SessionID, c, client.SessionOptions{}, nil)
	if err != nil {
		return err
	}
	defer stream.Close()
	p.follower = stream
	snap := stream.Session().Snapshot()
	p.upTo, p.seen = snap.TranscriptSequence, snap.TranscriptSequence
	p.feed = tui.NewFeed(snap.TranscriptSequence)
	p.lines = tui.NewLines(p.out)
	p.lines.Color = paletteFor(e.stdout).on && !f.asJSON
	p.lines.Progress = tui.IsTerminal(e.stdout) && !f.asJSON
	p.feed.OnChange = p.lines.Change
	if !f.asJSON {
		p.view = newLineView(p.track, p.note)
	}
	if err := p.begin(setup, f, approve, prompt); err != nil {
		return err
	}
	started = true
	if !f.asJSON {
		fmt.Fprintf(e.stderr, "session %s · %s\n", sess.SessionID, sess.Model)
		switch {
		case p.queued:
			fmt.Fprintf(e.stderr, "queued: the session is running a turn; this prompt runs after it\n")
		case p.steering:
			fmt.Fprintf(e.stderr, "steered: the prompt goes into the running turn before its next model call\n")
		}
	}
	return p.stream(stream)
}

// stream renders the session's deltas until the turn ends. A first Ctrl-C
// takes a queued prompt back, or interrupts the turn at once; a second
// leaves. SIGTERM leaves at once, and the turn runs on.
func (p *printer) stream(stream *client.Follower) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var wg sync.WaitGroup
	defer wg.Wait()
	streamCtx, stopStream := context.WithCancelCause(context.Background())
	defer stopStream(nil)
	defer p.stopAsking()
	wg.Go(func() {
		interrupted := false
		for {
			select {
			case sig := <-sigs:
				switch {
				case sig == syscall.SIGTERM:
					stopStream(errTerminated)
					return
				case interrupted:
					stopStream(errLeft)
					return
				}
				interrupted = true
				ictx, cancel := context.WithTimeout(context.Background(), requestTimeout)
				retracted := p.interrupt(ictx)
				cancel()
				if retracted {
					stopStream(errRetracted)
					return
				}
			case <-streamCtx.Done():
				return
			}
		}
	})
	if p.lines.Progress {
		wg.Go(func() {
			tick := time.NewTicker(progressTick)
			defer tick.Stop()
			for {
				select {
				case now := <-tick.C:
					p.mu.Lock()
					if !p.out.open {
						p.lines.Tick(now)
					}
					p.mu.Unlock()
				case <-streamCtx.Done():
					return
				}
			}
		})
	}
	for {
		ev, err := stream.Next(streamCtx)
		if err != nil {
			if cause := context.Cause(streamCtx); cause != nil && streamCtx.Err() != nil {
				p.mu.Lock()
				p.lines.Break()
				p.out.end()
				p.mu.Unlock()
				if cause == errRetracted {
					return errors.New("interrupted: the queued prompt was taken back")
				}
				return fmt.Errorf("%w: the turn runs on; `agentd attach %s` or `agentd log -f %s` to come back to it", cause, p.session, p.session)
			}
			return p.lost(err)
		}
		switch {
		case ev.Lost != nil:
			fmt.Fprintf(p.e.stderr, "agentd: connection lost (%v): reconnecting\n", ev.Lost)
		case ev.Reopened:
			fmt.Fprintln(p.e.stderr, "agentd: reconnected")
			p.reopened(*ev.Snapshot, stream.LastRecord())
		case p.view != nil:
			p.view.event(ev.SessionEvent)
		default:
			if ev.Raw != nil {
				fmt.Fprintf(p.e.stdout, "%s\n", ev.Raw)
			}
			p.track(ev.Delta)
		}
		if p.ended {
			return p.endErr
		}
	}
}

// reopened goes on with a stream opened again (on a host that replaced
// the last, say), whose projection is snap, last being the last record
// the stream before brought. A turn whose end was recorded but whose
// run_end the last stream did not bring has ended; the records the new
// stream brings first may end it too.
func (p *printer) reopened(snap protocol.SessionProjection, last uint64) {
	p.upTo = snap.TranscriptSequence
	if p.recorded != nil {
		p.finish(*p.recorded, true)
		return
	}
	p.mu.Lock()
	var gone []string
	pending := map[string]bool{}
	for _, in := range snap.Interactions {
		pending[in.InteractionID] = true
	}
	for id := range p.asked {
		if !pending[id] {
			gone = append(gone, id)
		}
	}
	p.mu.Unlock()
	for _, id := range gone {
		p.resolved(id) // answered while the stream was closed
	}
	if p.view != nil {
		p.view.opened(snap, last)
	}
}

// finish ends the command with turn t's outcome; synthesized says that
// the stream did not bring t's run_end, which --json then prints as the
// turn's last line.
func (p *printer) finish(t protocol.TurnSnapshot, synthesized bool) {
	if p.ended {
		return
	}
	p.ended, p.endErr = true, outcome(t)
	if synthesized && p.asJSON {
		b, _ := json.Marshal(protocol.SessionDelta{Event: protocol.EventRunEnd, TurnID: t.TurnID, Turn: &t})
		fmt.Fprintf(p.e.stdout, "%s\n", b)
	}
}

// outcome is how a turn that ended ends the command.
func outcome(t protocol.TurnSnapshot) error {
	if t.Status == protocol.TurnCompleted {
		return nil
	}
	return errTurnFailed{t}
}

// conn is the connection requests about the turn go on: the one the
// stream uses now.
func (p *printer) conn() *client.Conn {
	if p.follower != nil {
		return p.follower.Conn()
	}
	return p.c
}

// progressTick is how often the line under a silent tool call is redrawn.
const progressTick = 200 * time.Millisecond

// Why stream stopped before its turn ended.
var (
	errTerminated = errors.New("terminated")
	errLeft       = errors.New("left")
	errRetracted  = errors.New("retracted")
)

// printer renders a turn's deltas.
type printer struct {
	e       *env
	asJSON  bool
	c       *client.Conn // the connection the turn is begun on
	session string
	// follower follows the session until the turn ends, across lost
	// connections and replaced hosts; nil with --detach.
	follower *client.Follower
	// view turns the stream's events into the deltas to show, across
	// reopened streams; nil with --json, which prints the stream as it
	// comes.
	view *lineView
	// upTo is the last transcript record of the stream's opening
	// projection: a record at or before it was recorded before the stream
	// opened, and its live deltas came before too.
	upTo uint64
	// seen is the last transcript record handled.
	seen uint64
	// recorded is the turn as its end record says, once that came with
	// the turn's run_end still to come.
	recorded *protocol.TurnSnapshot
	// ended is set once the turn's end is shown; endErr is then how the
	// command ends.
	ended  bool
	endErr error
	// keys is the terminal approvals are answered on; nil when there is
	// none, and they are answered elsewhere.
	keys *os.File
	// wait is how long an approval is waited for when keys is nil; unset,
	// it is refused at once. Constant.
	wait  waitFlag
	feed  *tui.Feed  // the turn's blocks, written as lines by lines
	lines *tui.Lines // guarded by mu
	out   *promptOut // guarded by mu
	// message is the prompt's message id when it was submitted to a
	// session whose turn ran rather than starting a turn of its own;
	// queued, whether it waited in the queue then, and steering, whether
	// it waits to go into the turn that runs. Constant after begin.
	message          string
	queued, steering bool

	asking sync.WaitGroup // the approval prompt shown, and the refusals of those off a terminal

	mu      sync.Mutex
	turnID  string                 // guarded by mu: the turn streamed; empty until known
	ask     *question              // guarded by mu: the approval asked on the terminal, nil when none
	asked   map[string]bool        // guarded by mu: the approvals asked or said, not yet resolved
	waiting []protocol.Interaction // guarded by mu: approvals to ask once ask is resolved
	stopped bool                   // guarded by mu: no more approvals are asked
	// waits cancels, by interaction id, the refusal of an approval waited
	// for off a terminal once its wait is over; guarded by mu.
	waits map[string]context.CancelFunc
}

// question is an approval asked on the terminal.
type question struct {
	in     protocol.Interaction
	cancel context.CancelFunc
}

// promptOut is stdout where an approval prompt may have left a line open:
// whatever is written next starts on a fresh line.
type promptOut struct {
	w    io.Writer
	open bool
}

func (o *promptOut) Write(b []byte) (int, error) {
	if o.open && len(b) > 0 {
		o.open = false
		io.WriteString(o.w, "\n")
	}
	return o.w.Write(b)
}

// end ends the line a prompt left open.
func (o *promptOut) end() {
	if o.open {
		o.open = false
		io.WriteString(o.w, "\n")
	}
}

// begin starts the prompt's turn, or submits the prompt to the turn that
// runs, and notes which turn to stream.
func (p *printer) begin(ctx context.Context, f runFlags, approve, prompt string) error {
	placement := f.placement()
	if placement == "" {
		turnID := "t" + newID()
		_, err := client.Call(ctx, p.c, protocol.OpTurnStart, protocol.TurnStartInput{
			SessionID: p.session, TurnID: turnID, Content: protocol.Content{Text: prompt}, Approval: approve,
		})
		if errors.Is(err, client.ErrOperationConflict) {
			return fmt.Errorf("session %s is running a turn: add --queue to run this prompt after it, or --steer to send it into that turn", p.session)
		}
		p.setTurn(turnID)
		return err
	}
	p.message = newID()
	entry, err := client.Call(ctx, p.c, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{
		SessionID: p.session, MessageID: p.message, Content: protocol.Content{Text: prompt}, Placement: placement,
	})
	if err != nil {
		return err
	}
	p.queued = entry.State == protocol.QueueQueued && placement == protocol.PlacementNextTurn
	p.steering = entry.State == protocol.QueueQueued && placement == protocol.PlacementSteering
	// A follow-up, or a prompt that started a turn because none ran, has a
	// turn of its own; steering goes into a turn the stream names.
	if entry.State == protocol.QueueDelivered || placement == protocol.PlacementNextTurn {
		p.setTurn(protocol.MessageTurnID(p.message))
	}
	return nil
}

// detached says where the turn begun runs, and how to come back to it.
func (p *printer) detached(sess protocol.Session) error {
	if p.asJSON {
		return writeJSON(p.e.stdout, struct {
			SessionID string `json:"sessionId"`
			TurnID    string `json:"turnId,omitempty"`
			MessageID string `json:"messageId,omitempty"`
		}{sess.SessionID, p.turn(), p.message})
	}
	fmt.Fprintln(p.e.stdout, sess.SessionID)
	fmt.Fprintf(p.e.stderr, "the turn runs in session %s · %s: `agentd attach %s` to watch it, `agentd log -f %s` to follow it, `agentd stop %s` to stop it\n",
		sess.SessionID, sess.Model, sess.SessionID, sess.SessionID, sess.SessionID)
	return nil
}

func (p *printer) setTurn(id string) {
	p.mu.Lock()
	p.turnID = id
	p.mu.Unlock()
}

func (p *printer) turn() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.turnID
}

// interrupt takes the prompt back while it waits in the queue, and
// reports whether it did; otherwise it interrupts the streamed turn at
// once, and says so.
func (p *printer) interrupt(ctx context.Context) (retracted bool) {
	if p.message != "" {
		if _, err := client.Call(ctx, p.conn(), protocol.OpQueueRetract, protocol.QueueRetractInput{SessionID: p.session, EntryID: "q-" + p.message}); err == nil {
			return true
		}
	}
	t := p.turn()
	if t == "" {
		return false
	}
	p.mu.Lock()
	p.lines.Break()
	p.out.end()
	fmt.Fprintln(p.e.stderr, "agentd: interrupting the turn (Ctrl-C again to leave now)")
	p.mu.Unlock()
	if _, err := client.Call(ctx, p.conn(), protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: p.session, TurnID: t}); err != nil {
		fmt.Fprintf(p.e.stderr, "agentd: interrupting the turn: %v\n", err)
	}
	return false
}

// steered notes the turn a steering prompt went into, from the record of
// its delivery.
func (p *printer) steered(d protocol.SessionDelta) {
	if p.message == "" || d.Event != protocol.EventEntryAdded || p.turn() != "" {
		return
	}
	var rec struct {
		Type string `json:"type"`
		Data struct {
			MessageID string `json:"messageId"`
		} `json:"data"`
	}
	if json.Unmarshal(d.Entry, &rec) == nil && rec.Type == protocol.RecordUserMessage && rec.Data.MessageID == p.message {
		p.setTurn(d.TurnID)
	}
}

// note shows a line beside the turn's blocks.
func (p *printer) note(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.feed.Note(text, false)
}

// track follows the turn by one delta, rendering it but for --json, and
// notes the turn's end: its run_end, or its end record when that was
// recorded before the stream opened (its run_end came before too).
func (p *printer) track(d protocol.SessionDelta) {
	p.steered(d)
	if d.Event == protocol.EventRunStart && d.TurnID == protocol.MessageTurnID(p.message) && p.turn() == "" {
		p.setTurn(d.TurnID) // steering that missed its turn leads the next
	}
	turnID := p.turn()
	switch d.Event {
	case protocol.EventInteractionAdded:
		if in := d.Interaction; in != nil && in.State == protocol.InteractionPending && (d.TurnID == "" || d.TurnID == turnID) {
			p.render(d)
			p.approval(*in)
		}
		return
	case protocol.EventInteractionResolved:
		p.render(d)
		if in := d.Interaction; in != nil {
			p.resolved(in.InteractionID)
		}
		return
	}
	if d.TurnID != "" && d.TurnID != turnID {
		if d.Event == protocol.EventEntryAdded {
			p.entry(d, turnID)
		}
		return
	}
	p.render(d)
	switch {
	case d.Event == protocol.EventEntryAdded:
		if t := p.entry(d, turnID); t != nil {
			p.finish(*t, true)
		}
	case d.Event == protocol.EventRunEnd && d.Turn != nil && d.Turn.TurnID == turnID:
		p.finish(*d.Turn, false)
	}
}

// entry notes the record an entry_added delta carries, and returns the
// turn it ends: turnID's end record, when it was recorded before the
// stream opened.
func (p *printer) entry(d protocol.SessionDelta, turnID string) *protocol.TurnSnapshot {
	var rec protocol.TranscriptRecord
	if json.Unmarshal(d.Entry, &rec) != nil {
		return nil
	}
	p.seen = max(p.seen, rec.Seq)
	var end protocol.TurnEndData
	if rec.Type != protocol.RecordTurnEnd || rec.TurnID == "" || rec.TurnID != turnID || json.Unmarshal(rec.Data, &end) != nil {
		return nil
	}
	t := protocol.TurnSnapshot{SessionID: p.session, TurnID: rec.TurnID, Status: end.Status, Error: end.Error, Usage: end.Usage}
	if rec.Seq > p.upTo {
		p.recorded = &t // its run_end follows
		return nil
	}
	return &t
}

// render writes a delta through the feed, but for --json.
func (p *printer) render(d protocol.SessionDelta) {
	if p.asJSON {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.feed.Delta(d)
}

// approval asks a permission request on the terminal, once the one asked
// before it is resolved; off a terminal it says how to answer it.
func (p *printer) approval(in protocol.Interaction) {
	p.mu.Lock()
	asked := p.asked[in.InteractionID]
	p.asked[in.InteractionID] = true
	p.mu.Unlock()
	if asked {
		return
	}
	if p.keys == nil {
		p.unanswerable(in)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ask != nil {
		p.waiting = append(p.waiting, in)
		return
	}
	p.askLocked(in)
}

// unanswerable handles an approval asked where nobody can answer it: it
// is refused at once, or with --wait-approval once its wait is over,
// unless answered elsewhere (agentd answer, agentd attach) first.
func (p *printer) unanswerable(in protocol.Interaction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	say := func(format string, args ...any) {
		if !p.asJSON {
			p.lines.Break()
			p.out.end()
			fmt.Fprintf(p.e.stderr, format, args...)
		}
	}
	switch {
	case !p.wait.set:
		say("refused, as nobody can answer here (not a terminal): %s\n  --wait-approval [DURATION] to wait for agentd answer or agentd attach, --approve all to allow such calls\n", tui.Visible(in.Prompt))
	case p.wait.d == 0:
		say("waiting for approval: %s\n  agentd answer %s %s allow|deny\n", tui.Visible(in.Prompt), in.SessionID, in.InteractionID)
		return
	default:
		say("waiting %s for approval: %s\n  agentd answer %s %s allow|deny\n", p.wait.d, tui.Visible(in.Prompt), in.SessionID, in.InteractionID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.waits[in.InteractionID] = cancel
	wait := p.wait.d
	p.asking.Go(func() {
		defer cancel()
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return // answered elsewhere, or the turn ended
			}
		}
		// Not cancelled by the answer's own resolution.
		actx, acancel := context.WithTimeout(context.Background(), requestTimeout)
		defer acancel()
		_, err := client.Call(actx, p.conn(), protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: in.SessionID, InteractionID: in.InteractionID, Answer: protocol.AnswerDeny})
		switch {
		case err == nil && wait > 0:
			p.mu.Lock()
			say("refused, as no answer came within %s: %s\n", wait, tui.Visible(in.Prompt))
			p.mu.Unlock()
		case err != nil && !errors.Is(err, client.ErrNotFound): // not found: answered elsewhere first
			fmt.Fprintf(p.e.stderr, "agentd: refusing %s: %v\n", in.InteractionID, err)
		}
	})
}

// resolved gives the prompt of an interaction resolved, here or
// elsewhere, way to the next one waiting.
func (p *printer) resolved(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.asked, id)
	if cancel, ok := p.waits[id]; ok {
		delete(p.waits, id)
		cancel()
	}
	for i, w := range p.waiting {
		if w.InteractionID == id {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			return
		}
	}
	if p.ask == nil || p.ask.in.InteractionID != id {
		return
	}
	p.ask.cancel()
	p.ask = nil
	if len(p.waiting) > 0 {
		next := p.waiting[0]
		p.waiting = p.waiting[1:]
		p.askLocked(next)
	}
}

// stopAsking takes the prompt shown away and waits until the terminal is
// back as it was.
func (p *printer) stopAsking() {
	p.mu.Lock()
	p.stopped = true
	if p.ask != nil {
		p.ask.cancel()
		p.ask = nil
	}
	p.waiting = nil
	for id, cancel := range p.waits {
		delete(p.waits, id)
		cancel()
	}
	p.mu.Unlock()
	p.asking.Wait()
}

// askLocked shows the approval prompt for in and reads the answer from the
// terminal in a goroutine of its own; the prompt gives way when the
// interaction is resolved elsewhere, or the turn ends.
func (p *printer) askLocked(in protocol.Interaction) {
	if p.stopped {
		return
	}
	keys, err := readKeys(p.keys)
	if err != nil {
		fmt.Fprintf(p.e.stderr, "waiting for approval: %s\n  agentd answer %s %s allow|deny\n", tui.Visible(in.Prompt), in.SessionID, in.InteractionID)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.ask = &question{in: in, cancel: cancel}
	tool := in.Tool()
	if tool == "" {
		tool = "this tool"
	}
	p.lines.Break()
	fmt.Fprintf(p.out, "? allow %s  [y]es [n]o [a]lways allow %s in this session: ", tui.Visible(in.Prompt), tui.Visible(tool))
	p.out.open = true
	p.asking.Go(func() {
		defer cancel()
		key, err := keys.read(ctx, "yYnNaA\r\n\x04\x1b")
		keys.restore()
		if err != nil {
			return // resolved elsewhere, or the turn ended
		}
		answer, word := protocol.AnswerDeny, "no"
		switch key {
		case 'y', 'Y':
			answer, word = protocol.AnswerAllow, "yes"
		case 'a', 'A':
			answer, word = protocol.AnswerAllowAlways, "always"
		}
		p.mu.Lock()
		if p.ask != nil && p.ask.in.InteractionID == in.InteractionID && p.out.open {
			p.out.open = false
			io.WriteString(p.out.w, word+"\n")
		}
		p.mu.Unlock()
		actx, acancel := context.WithTimeout(context.Background(), requestTimeout)
		defer acancel()
		_, err = client.Call(actx, p.conn(), protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: in.SessionID, InteractionID: in.InteractionID, Answer: answer})
		if err != nil && !errors.Is(err, client.ErrNotFound) { // not found: answered elsewhere first
			fmt.Fprintf(p.e.stderr, "agentd: answering %s: %v\n", in.InteractionID, err)
		}
	})
}

// lost ends the command when the stream ended for good before the
// turn's end was shown: after a shutdown or a removal it says so; else
// it reads the records it lacks from the transcript, and shows the turn's
// end when they hold it. It never ends as the turn's success unless the
// turn's end was shown.
func (p *printer) lost(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	switch {
	case errors.Is(cause, client.ErrSessionRemoved):
		return sessionTakenAway(ctx, p.conn(), p.session)
	case errors.Is(cause, client.ErrHostShutDown):
		// Asking again would start another host.
		return fmt.Errorf("%w before the turn ended (`agentd log %s` shows how it ended)", cause, p.session)
	}
	unknown := func(err error) error {
		return fmt.Errorf("%v; the turn's outcome is unknown, and its worker may still finish it (`agentd log %s` shows how it ended): %w", cause, p.session, err)
	}
	c := p.conn()
	if c.Err() != nil {
		l, err := locateSession(ctx, p.session)
		if err != nil {
			return unknown(err)
		}
		defer l.conn.Close()
		c = l.conn
	}
	t, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: p.session, TurnID: p.turn()})
	if err != nil {
		return unknown(err)
	}
	if t.Status == protocol.TurnRunning {
		return unknown(errors.New("the turn still runs"))
	}
	if err := p.readRest(ctx, c); err != nil {
		return unknown(err)
	}
	if !p.ended {
		return unknown(errors.New("the transcript does not hold the turn's end"))
	}
	return p.endErr
}

// readRest shows the transcript records after the last one handled, up
// to the turn's end, read page by page on c.
func (p *printer) readRest(ctx context.Context, c *client.Conn) error {
	p.upTo = ^uint64(0) // none of them comes with a run_end
	req := client.PageRequest{Direction: client.PageNewer, Anchor: p.seen + 1}
	for !p.ended {
		page, err := c.TranscriptPage(ctx, p.session, req)
		if err != nil {
			return err
		}
		for _, r := range page.Records {
			if r.Seq <= p.seen {
				continue
			}
			entry, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if p.view != nil {
				p.view.record(r, entry)
			} else {
				d := protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: r.TurnID, Entry: entry}
				b, _ := json.Marshal(d)
				fmt.Fprintf(p.e.stdout, "%s\n", b)
				p.track(d)
			}
			if p.ended {
				return nil
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		req = client.PageRequest{Direction: client.PageNewer, Cursor: page.NextCursor}
	}
	return nil
}

// keyReader reads single keys from a terminal, without waiting for Enter
// and without echoing them. Ctrl-C still interrupts: the terminal still
// turns it into SIGINT.
type keyReader struct {
	fd  int
	old *unix.Termios // the terminal's mode, given back by restore
}

// readKeys puts the terminal f in the mode a keyReader needs; restore
// gives it back as it was.
func readKeys(f *os.File) (*keyReader, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	keys := *old
	keys.Lflag &^= unix.ICANON | unix.ECHO
	keys.Cc[unix.VMIN], keys.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &keys); err != nil {
		return nil, err
	}
	return &keyReader{fd: fd, old: old}, nil
}

func (k *keyReader) restore() { unix.IoctlSetTermios(k.fd, unix.TCSETS, k.old) }

// read reads keys until one of accept comes; ctx ending gives up.
func (k *keyReader) read(ctx context.Context, accept string) (byte, error) {
	buf := make([]byte, 64)
	for {
		m, err := pollRead(ctx, k.fd, buf)
		if err != nil {
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		for _, b := range buf[:m] {
			if strings.IndexByte(accept, b) >= 0 {
				return b, nil
			}
		}
	}
}
