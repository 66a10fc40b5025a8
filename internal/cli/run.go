package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
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
	var open protocol.SubscriptionOpenResult
	if err := c.Request(setup, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: sess.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}}, &open); err != nil {
		return err
	}
	watch := c.Watch(open.SubscriptionID)
	defer watch.Close()
	if err := c.Request(setup, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}, nil); err != nil {
		return err
	}
	turnID := "t" + newID()
	var started protocol.TurnStartResult
	if err := c.Request(setup, protocol.OpTurnStart, protocol.TurnStartInput{
		SessionID: sess.SessionID, TurnID: turnID, Content: protocol.Content{Text: prompt}, Approval: f.approve,
	}, &started); err != nil {
		return err
	}
	if !f.asJSON {
		fmt.Fprintf(e.stderr, "session %s · %s\n", sess.SessionID, sess.Model)
	}

	// A first interrupt stops the turn at once; a second leaves.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	go func() {
		select {
		case <-sigs:
			ictx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			c.Request(ictx, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: sess.SessionID, TurnID: turnID}, nil)
			cancel()
		case <-streamCtx.Done():
			return
		}
		select {
		case <-sigs:
			stopStream()
		case <-streamCtx.Done():
		}
	}()

	p := &printer{e: e, asJSON: f.asJSON, interactive: interactive, c: c, session: sess.SessionID, turnID: turnID, in: bufio.NewReader(e.stdin)}
	for {
		fr, err := watch.Next(streamCtx)
		if err != nil {
			if streamCtx.Err() != nil {
				return errors.New("interrupted")
			}
			return p.lost(err)
		}
		switch fr.Kind {
		case protocol.KindSessionDelta:
			var d protocol.SessionDeltaFrame
			if err := fr.Decode(&d); err != nil {
				return err
			}
			var delta protocol.SessionDelta
			if err := json.Unmarshal(d.Delta, &delta); err != nil {
				return err
			}
			if done, err := p.delta(streamCtx, d.Delta, delta); done {
				return err
			}
		case protocol.KindSubscriptionClosed:
			var cl protocol.SubscriptionClosedFrame
			fr.Decode(&cl)
			return p.lost(fmt.Errorf("the session's stream closed: %s", cl.Reason))
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
	turnID      string
	in          *bufio.Reader
	midLine     bool
}

func (p *printer) out() io.Writer { return p.e.stdout }

func (p *printer) text(s string) {
	if s == "" {
		return
	}
	fmt.Fprint(p.out(), s)
	p.midLine = !strings.HasSuffix(s, "\n")
}

func (p *printer) endLine() {
	if p.midLine {
		fmt.Fprintln(p.out())
		p.midLine = false
	}
}

// delta renders one delta; done reports the end of the turn.
func (p *printer) delta(ctx context.Context, raw json.RawMessage, d protocol.SessionDelta) (bool, error) {
	if p.asJSON {
		fmt.Fprintf(p.out(), "%s\n", raw)
	}
	if d.TurnID != "" && d.TurnID != p.turnID && d.Event != protocol.EventInteractionAdded {
		return false, nil
	}
	switch d.Event {
	case protocol.EventMessageUpdate:
		if !p.asJSON {
			p.text(d.Text)
		}
	case protocol.EventMessageEnd:
		if !p.asJSON {
			p.endLine()
		}
	case protocol.EventToolCallStart:
		if !p.asJSON {
			p.endLine()
			fmt.Fprintf(p.out(), "→ %s\n", describeTool(d.ToolCall))
		}
	case protocol.EventToolCallEnd:
		if !p.asJSON {
			p.endLine()
			out := strings.TrimRight(d.ToolCall.Output, "\n")
			lines := strings.Split(out, "\n")
			if len(lines) > 40 {
				lines = append(lines[:40], fmt.Sprintf("… %d more lines", len(lines)-40))
			}
			for _, l := range lines {
				fmt.Fprintf(p.out(), "  │ %s\n", l)
			}
		}
	case protocol.EventInteractionAdded:
		if d.Interaction != nil && d.Interaction.State == protocol.InteractionPending {
			return false, p.ask(ctx, *d.Interaction)
		}
	case protocol.EventRunEnd:
		if d.Turn == nil || d.Turn.TurnID != p.turnID {
			return false, nil
		}
		if !p.asJSON {
			p.endLine()
		}
		if d.Turn.Status == protocol.TurnCompleted {
			return true, nil
		}
		return true, errTurnFailed{*d.Turn}
	}
	return false, nil
}

func describeTool(tc *protocol.ToolCallInfo) string {
	if tc == nil {
		return "tool"
	}
	var args map[string]any
	json.Unmarshal(tc.Arguments, &args)
	if cmd, ok := args["command"].(string); ok {
		return "$ " + cmd
	}
	if path, ok := args["path"].(string); ok {
		return tc.Name + " " + path
	}
	return tc.Name
}

// ask answers a permission request inline on a terminal; elsewhere it says
// how to answer it.
func (p *printer) ask(ctx context.Context, in protocol.Interaction) error {
	if !p.interactive {
		if !p.asJSON {
			fmt.Fprintf(p.e.stderr, "waiting for approval: %s\n  agentd answer %s %s allow|deny\n", in.Prompt, in.SessionID, in.InteractionID)
		}
		return nil
	}
	p.endLine()
	fmt.Fprintf(p.out(), "? allow %s [y/N] ", in.Prompt)
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
		fmt.Fprintln(p.out(), "(already answered)")
		return nil
	}
	return err
}

// lost explains a stream that ended before the turn: it asks for the
// turn's outcome, which a replacement worker records.
func (p *printer) lost(cause error) error {
	p.endLine()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var t protocol.TurnSnapshot
	if err := p.c.Request(ctx, protocol.OpTurnQuery, protocol.TurnRef{SessionID: p.session, TurnID: p.turnID}, &t); err != nil {
		return fmt.Errorf("%v; the turn's outcome is unknown, and its worker may still finish it (`agentd log %s` shows how it ended): %w", cause, p.session, err)
	}
	if t.Status == protocol.TurnCompleted {
		return nil
	}
	return errTurnFailed{t}
}
