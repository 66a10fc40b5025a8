package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// errTurnFailed is returned when the turn ended in any way but completed.
type errTurnFailed struct{ turn protocol.TurnSnapshot }

func (e errTurnFailed) Error() string {
	if e.turn.Error != "" {
		return fmt.Sprintf("turn %s: %s", e.turn.Status, e.turn.Error)
	}
	return "turn " + e.turn.Status
}

type runFlags struct {
	session, cwd, title, model, thinking, approve string
	asJSON                                        bool
	// queue and steer send the prompt to a session whose turn runs: to
	// run after it, or into it at its next model call.
	queue, steer bool
}

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

func newRunCmd(e *env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run PROMPT",
		Short: "Run one turn of a session's agent and stream it until it ends.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || strings.TrimSpace(strings.Join(args, " ")) == "" {
				return usagef("run needs a prompt")
			}
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
			if f.model != "" && !strings.Contains(strings.Trim(f.model, "/"), "/") {
				return usagef("--model %q: provider requires a model (provider/model)", f.model)
			}
			switch {
			case f.queue && f.steer:
				return usagef("--queue and --steer: choose one")
			case (f.queue || f.steer) && f.session == "":
				return usagef("--queue and --steer need --session")
			case (f.queue || f.steer) && f.approve != "":
				return usagef("--approve starts a turn of its own; with --queue or --steer the session's policy applies")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTurn(cmd.Context(), e, f, strings.Join(args, " "))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.session, "session", "", "continue this session (an id or a unique prefix)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory of a new session (default: the current directory)")
	fl.StringVar(&f.title, "title", "", "title of a new session")
	fl.StringVar(&f.model, "model", "", "model, provider/model (default: the last selected)")
	fl.StringVar(&f.thinking, "thinking", "", "thinking level: off, low, medium or high")
	fl.StringVar(&f.approve, "approve", "", "which tool calls wait for you: ask (default on a terminal), all or read-only (default otherwise)")
	fl.BoolVar(&f.asJSON, "json", false, "print the event stream as JSON lines")
	fl.BoolVar(&f.queue, "queue", false, "if a turn runs, run the prompt after it (and stream that turn)")
	fl.BoolVar(&f.steer, "steer", false, "if a turn runs, send the prompt into it before its next model call (and stream that turn)")
	return cmd
}

func runTurn(ctx context.Context, e *env, f runFlags, prompt string) error {
	interactive := isTerminal(e.stdin) && isTerminal(e.stdout) && !f.asJSON
	if f.approve == "" {
		f.approve = protocol.ApprovalReadOnly
		if interactive {
			f.approve = protocol.ApprovalAsk
		}
	}
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var c *client.Conn
	var sess protocol.Session
	if f.session == "" {
		var err error
		if c, err = open(setup); err != nil {
			return err
		}
		defer c.Close()
		if sess, err = createSession(setup, c, protocol.SessionCreateInput{Cwd: f.cwd, Title: f.title, Model: f.model, Approval: f.approve}); err != nil {
			return err
		}
	} else {
		l, err := locateSession(setup, f.session)
		if err != nil {
			return err
		}
		c, sess = l.conn, l.session
		defer c.Close()
		if f.model != "" {
			if err := c.Request(setup, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: sess.SessionID, Model: f.model}, nil); err != nil {
				return err
			}
		}
	}
	if f.thinking != "" {
		if err := c.Request(setup, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: sess.SessionID, Level: f.thinking}, nil); err != nil {
			return err
		}
	}
	stream, err := c.OpenSession(setup, sess.SessionID, client.SessionOptions{})
	if err != nil {
		return err
	}
	defer stream.Close()
	p := &printer{e: e, asJSON: f.asJSON, interactive: interactive, c: c, session: sess.SessionID, in: bufio.NewReader(e.stdin),
		feed: tui.NewFeed(stream.Snapshot().TranscriptSequence)}
	p.feed.OnChange = tui.NewLines(e.stdout).Change
	if err := p.begin(setup, f, prompt); err != nil {
		return err
	}
	if !f.asJSON {
		fmt.Fprintf(e.stderr, "session %s · %s\n", sess.SessionID, sess.Model)
		if p.queued {
			fmt.Fprintf(e.stderr, "queued: the session is running a turn\n")
		}
	}

	// A first interrupt takes a queued prompt back, or stops the turn at
	// once; a second leaves.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	go func() {
		select {
		case <-sigs:
			ictx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			retracted := p.interrupt(ictx)
			cancel()
			if retracted {
				stopStream() // nothing of the prompt's will run
				return
			}
		case <-streamCtx.Done():
			return
		}
		select {
		case <-sigs:
			stopStream()
		case <-streamCtx.Done():
		}
	}()

	for {
		ev, err := stream.Next(streamCtx)
		if err != nil {
			if streamCtx.Err() != nil {
				return errors.New("interrupted")
			}
			return p.lost(err)
		}
		if done, err := p.delta(streamCtx, ev.Raw, ev.Delta); done {
			return err
		}
	}
}

// printer renders a turn's deltas.
type printer struct {
	e           *env
	asJSON      bool
	interactive bool
	c           *client.Conn
	session     string
	in          *bufio.Reader
	feed        *tui.Feed // the turn's blocks, written as lines
	// message is the prompt's message id when it was submitted to a
	// session whose turn ran rather than starting a turn of its own;
	// queued, whether it waited in the queue then.
	message string
	queued  bool

	mu     sync.Mutex
	turnID string // guarded by mu: the turn streamed; empty until known
}

// begin starts the prompt's turn, or submits the prompt to the turn that
// runs, and notes which turn to stream.
func (p *printer) begin(ctx context.Context, f runFlags, prompt string) error {
	placement := f.placement()
	if placement == "" {
		turnID := "t" + newID()
		err := p.c.Request(ctx, protocol.OpTurnStart, protocol.TurnStartInput{
			SessionID: p.session, TurnID: turnID, Content: protocol.Content{Text: prompt}, Approval: f.approve,
		}, nil)
		if errors.Is(err, client.ErrOperationConflict) {
			return fmt.Errorf("session %s is running a turn: add --queue to run this prompt after it, or --steer to send it into that turn", p.session)
		}
		p.setTurn(turnID)
		return err
	}
	p.message = "m" + newID()
	var entry protocol.QueueEntry
	if err := p.c.Request(ctx, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{
		SessionID: p.session, MessageID: p.message, Content: protocol.Content{Text: prompt}, Placement: placement,
	}, &entry); err != nil {
		return err
	}
	p.queued = entry.State == protocol.QueueQueued
	// A follow-up, or a prompt that started a turn because none ran, has a
	// turn of its own; steering goes into a turn the stream names.
	if entry.State == protocol.QueueDelivered || placement == protocol.PlacementNextTurn {
		p.setTurn("turn-" + p.message)
	}
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
// reports whether it did; otherwise it stops the streamed turn at once.
func (p *printer) interrupt(ctx context.Context) (retracted bool) {
	if p.message != "" && p.c.Request(ctx, protocol.OpQueueRetract, protocol.QueueRetractInput{SessionID: p.session, EntryID: "q-" + p.message}, nil) == nil {
		return true
	}
	if t := p.turn(); t != "" {
		p.c.Request(ctx, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: p.session, TurnID: t}, nil)
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

// delta renders one delta; done reports the end of the turn.
func (p *printer) delta(ctx context.Context, raw json.RawMessage, d protocol.SessionDelta) (bool, error) {
	if p.asJSON {
		fmt.Fprintf(p.e.stdout, "%s\n", raw)
	}
	p.steered(d)
	if d.Event == protocol.EventRunStart && d.TurnID == "turn-"+p.message && p.turn() == "" {
		p.setTurn(d.TurnID) // steering that missed its turn leads the next
	}
	turnID := p.turn()
	if d.TurnID != "" && d.TurnID != turnID && d.Event != protocol.EventInteractionAdded {
		return false, nil
	}
	if d.Event == protocol.EventInteractionAdded {
		if d.Interaction != nil && d.Interaction.State == protocol.InteractionPending {
			return false, p.ask(ctx, *d.Interaction)
		}
		return false, nil
	}
	if !p.asJSON && d.Event != protocol.EventInteractionResolved {
		p.feed.Delta(d)
	}
	if d.Event != protocol.EventRunEnd || d.Turn == nil || d.Turn.TurnID != turnID {
		return false, nil
	}
	if d.Turn.Status == protocol.TurnCompleted {
		return true, nil
	}
	return true, errTurnFailed{*d.Turn}
}

// ask answers a permission request inline on a terminal; elsewhere it says
// how to answer it.
func (p *printer) ask(ctx context.Context, in protocol.Interaction) error {
	if !p.interactive {
		if !p.asJSON {
			fmt.Fprintf(p.e.stderr, "waiting for approval: %s\n  agentd answer %s %s allow|deny\n", tui.Visible(in.Prompt), in.SessionID, in.InteractionID)
		}
		return nil
	}
	fmt.Fprintf(p.e.stdout, "? allow %s [y/N] ", tui.Visible(in.Prompt))
	line, err := p.in.ReadString('\n')
	if err != nil && line == "" {
		return nil
	}
	answer := protocol.AnswerDeny
	if a := strings.ToLower(strings.TrimSpace(line)); a == "y" || a == "yes" {
		answer = protocol.AnswerAllow
	}
	actx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err = p.c.Request(actx, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: in.SessionID, InteractionID: in.InteractionID, Answer: answer}, nil)
	if errors.Is(err, client.ErrNotFound) {
		fmt.Fprintln(p.e.stdout, "(already answered)")
		return nil
	}
	return err
}

// lost explains a stream that ended before the turn: it asks for the
// turn's outcome, which a replacement worker records.
func (p *printer) lost(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var t protocol.TurnSnapshot
	var closed *client.ClosedError
	if errors.As(cause, &closed) && closed.Reason == protocol.ClosedSessionRemoved {
		return sessionTakenAway(ctx, p.c, p.session)
	}
	if err := p.c.Request(ctx, protocol.OpTurnQuery, protocol.TurnRef{SessionID: p.session, TurnID: p.turn()}, &t); err != nil {
		return fmt.Errorf("%v; the turn's outcome is unknown, and its worker may still finish it (`agentd log %s` shows how it ended): %w", cause, p.session, err)
	}
	if t.Status == protocol.TurnCompleted {
		return nil
	}
	return errTurnFailed{t}
}
