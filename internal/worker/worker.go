// Package worker runs one session: it is the single writer of the
// session's transcript, runs the agent loop for its turns, holds the
// session's live state (turns, queue, pending interactions, plan), and
// serves it to its host over its own socket with the same framing as the
// host's clients. A thin main calls Run.
//
// It knows nothing of the catalog or of other sessions: its host tells it
// which session, where, and with which settings.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/agent"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/protocol"
)

// Config says which session a worker runs and how.
type Config struct {
	Home string
	// Session is the header the host gives the worker: id, cwd, model,
	// sandbox, and the directories of its plugin packages (Plugins),
	// which the worker loads at its start.
	Session  protocol.Session
	Thinking string
	Approval string
	// SocketPath is where the worker listens for its host.
	SocketPath string
	// TranscriptPath is the session's transcript.
	TranscriptPath string
	Providers      ProviderResolver
	Tools          []tools.Tool
	// ToolEnv, when set, gives the environment the tools run commands
	// with, asked once per turn; nil means the worker's own.
	ToolEnv func() []string
	System  string
	Logger  *slog.Logger
	Version string
	// PreviousExit, when set, is why the session's previous worker ended:
	// a turn it left running is recorded as failed with this cause.
	PreviousExit string
	// Ready, when set, is written to and closed once the worker serves:
	// its host waits on it instead of dialling until it answers.
	Ready io.WriteCloser
	// CompactAt is the share of a model's window, in percent, past which
	// a turn's request is compacted first, unless the session sets its
	// own; 0 means protocol.DefaultCompactAt.
	CompactAt int
	// MCPStartTimeout bounds each MCP server's start (initialize and its
	// tool list); 0: mcp.DefaultStartTimeout.
	MCPStartTimeout time.Duration
	// OrphanGrace is how long the worker lives on with no host connected
	// and no turn running: once its host is gone (killed, say) and no
	// other claims it, it exits. Zero means it waits for a host forever.
	OrphanGrace time.Duration
}

// Run serves the session until ctx ends or the host asks the worker to
// stop. A running turn is then recorded as interrupted.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	logger := cfg.Logger.With("session", cfg.Session.SessionID)
	cfg.Session.Approval, cfg.Session.Thinking = cfg.Approval, cfg.Thinking
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &session{
		id:        cfg.Session.SessionID,
		providers: cfg.Providers,
		tools:     cfg.Tools,
		toolEnv:   cfg.ToolEnv,
		system:    cfg.System,
		logger:    logger,
		todo:      &tools.Todo{},
		base:      base,
		homeDir:   cfg.Home,
		endpoint:  cfg.SocketPath,
		header:    cfg.Session,
		turns:     map[string]*turn{},
		pending:   map[string]*interaction{},
		live:      protocol.NewProjector(protocol.SessionProjection{}),
		subs:      map[string]*subscription{},
		messages:  map[string]protocol.QueueEntry{},
		allowed:   map[string]bool{},
		plugins:   newPackages(logger),

		defaultCompactAt: cfg.CompactAt,
	}
	// The transcript is closed last, once everything that may write to
	// it has ended.
	defer func() {
		if s.log != nil {
			s.log.Close()
		}
	}()
	pol, closeSandbox, err := newSandbox(cfg, logger)
	if err != nil {
		return fmt.Errorf("preparing the sandbox of the session's commands: %w", err)
	}
	defer closeSandbox() // once every command has ended
	s.sandbox = pol
	// The session's shell runs and PTYs start, like the tools' commands,
	// without the model providers' keys, and in the same sandbox.
	s.res = s.newResources(filepath.Join(filepath.Dir(cfg.TranscriptPath), "resources"), s.turnEnviron())
	defer s.res.Close()
	// The MCP servers start first, beside the rest of the worker's start:
	// their processes are the longest part of it, and the first turn
	// waits for them only if they are still starting when it needs their
	// tools.
	s.mcp = s.startMCP(cfg)
	defer s.closeNets()
	defer s.mcp.Close() // before the resources close: it ends their services
	if s.log, err = transcript.Open(cfg.TranscriptPath, transcript.Options{}); err != nil {
		return fmt.Errorf("opening the transcript: %w", err)
	}
	os.Remove(cfg.SocketPath)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.SocketPath, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listening for the host: %w", err)
	}
	if err := os.Chmod(cfg.SocketPath, 0o600); err != nil {
		ln.Close()
		return err
	}
	ln.SetUnlinkOnClose(true)
	// Each of the session's plugin packages is loaded once, here, for
	// the worker's life.
	s.plugins.use(cfg.Session.Plugins)
	s.todo.OnChange = func(items []protocol.TodoItem) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.emitLocked(protocol.SessionDelta{Event: protocol.EventTodoChanged, Todo: items})
	}
	if err := s.recover(cfg.PreviousExit); err != nil {
		ln.Close()
		return err
	}
	defer os.Remove(home.WorkerRegistrationPath(cfg.Home, s.id))
	srv, err := server.New(server.Config{
		HostID: "worker", CompositionID: link.CompositionWorker, TrustCaller: true, ReceiveFiles: true,
		Version: cfg.Version, Logger: logger, IdleGrace: cfg.OrphanGrace,
		Compose: func(_ context.Context, srv *server.Server) (server.Composition, error) {
			// Handlers run only once the composition is ready, after this:
			// a worker that answers is registered.
			s.epoch = srv.Epoch()
			s.checkIdle = srv.CheckIdle
			reg := home.WorkerRegistration{
				SessionID: s.id, PID: os.Getpid(), Endpoint: cfg.SocketPath, Epoch: s.epoch, StartedAt: time.Now().UTC(),
			}
			if st, err := proc.ReadStat(reg.PID); err == nil {
				reg.ProcessStart = st.StartTime
			}
			s.mu.Lock()
			s.reg = reg
			s.mu.Unlock()
			if err := home.WriteWorkerRegistration(cfg.Home, reg); err != nil {
				logger.Warn("registering the worker", "err", err)
			}
			return &composition{s: s, stop: cancel}, nil
		},
	})
	if err != nil {
		ln.Close()
		return err
	}
	var readyWritten sync.WaitGroup
	if cfg.Ready != nil {
		served, servedEnd := context.WithCancel(ctx)
		defer func() { servedEnd(); readyWritten.Wait() }()
		readyWritten.Go(func() {
			select {
			case <-srv.Ready():
				cfg.Ready.Write([]byte{'\n'})
			case <-srv.Draining():
			case <-served.Done():
			}
			cfg.Ready.Close()
		})
	}
	// Stopped as asked (ctx ended, the host asked, the orphan grace
	// passed) is a worker's ordinary end.
	if err := srv.Run(ctx, ln); !errors.Is(err, server.ErrStopped) {
		return err
	}
	return nil
}

// composition is the worker's host composition: the session's table.
type composition struct {
	s    *session
	stop context.CancelFunc
}

func (c *composition) Handlers() server.Table { return c.s.handlers() }

// Authorize implements server.Authorizer. The host decided, once, whether
// the client it forwards a call for may run it: its connection is the one
// the worker trusts to name a caller. Anyone else who reaches the worker's
// socket (a bench, a test) is held to the owner's rule.
func (c *composition) Authorize(_ context.Context, call *server.Call) error {
	if call.Identity.Surface == link.SurfaceHost {
		return nil
	}
	return server.AuthorizeOwner(call)
}

// BeginDrain interrupts the running turn: it is recorded as interrupted.
func (c *composition) BeginDrain() { c.stop() }

func (c *composition) Close(context.Context) error {
	c.stop()
	c.s.res.Drain()
	c.s.runs.Wait()
	c.s.draws.Wait()
	// The connections are closed: every batch's receipt has settled.
	c.s.pumps.Wait()
	return c.s.log.Sync()
}

func (c *composition) AttachConnection(id server.Identity, out *server.OutboundWriter) server.Attachment {
	return c.s.AttachConnection(id, out)
}

func (c *composition) Busy() bool { return c.s.Busy() }

// recover rebuilds the conversation, the plan and the queue of waiting
// messages from the transcript, and closes a turn the previous worker left
// running.
func (s *session) recover(previousExit string) error {
	last := s.log.Last()
	if last == 0 {
		return nil
	}
	records, err := s.log.Read(1, last)
	if err != nil {
		return fmt.Errorf("reading the transcript: %w", err)
	}
	var open *protocol.TurnSnapshot
	var plan planReplay
	// A record that cannot be read is left out of what is rebuilt, and
	// said so in the log; the records around it still count.
	read := func(r transcript.Record, v any) bool {
		if err := json.Unmarshal(r.Data, v); err != nil {
			s.logger.Warn("a transcript record cannot be read; recovery goes on without it", "seq", r.Seq, "type", r.Type, "err", err)
			return false
		}
		return true
	}
	for _, r := range records {
		switch r.Type {
		case protocol.RecordTurnStart:
			var d protocol.TurnStartData
			read(r, &d)
			t := &turn{snap: protocol.TurnSnapshot{SessionID: s.id, TurnID: r.TurnID, RunID: d.RunID, Status: protocol.TurnRunning}}
			s.turns[r.TurnID] = t
			open = &t.snap
			s.lastTurn = open
			if d.MessageID != "" {
				s.dequeueLocked(d.MessageID, protocol.QueueDelivered)
			}
		case protocol.RecordTurnEnd:
			var d protocol.TurnEndData
			read(r, &d)
			if t, ok := s.turns[r.TurnID]; ok {
				t.snap.Status, t.snap.Error, t.snap.Usage = d.Status, d.Error, d.Usage
			}
			open = nil
		case protocol.RecordUserMessage:
			var d protocol.UserMessageData
			if !read(r, &d) {
				break
			}
			s.history = append(s.history, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: d.Text}}})
			if d.MessageID != "" {
				s.dequeueLocked(d.MessageID, protocol.QueueDelivered)
			}
		case protocol.RecordQueueAdd:
			var d protocol.QueueData
			if !read(r, &d) || d.MessageID == "" {
				break
			}
			if _, known := s.messages[d.MessageID]; !known { // a message is queued once
				s.enqueueLocked(protocol.QueueEntry{EntryID: d.EntryID, MessageID: d.MessageID,
					Content: protocol.Content{Text: d.Text}, Placement: d.Placement, State: protocol.QueueQueued})
			}
		case protocol.RecordToolAllowed:
			var d protocol.ToolAllowedData
			if read(r, &d) && d.Tool != "" {
				s.allowed[d.Tool] = true
			}
		case protocol.RecordQueueRetract:
			var d protocol.QueueData
			if !read(r, &d) {
				break
			}
			s.dequeueLocked(d.MessageID, protocol.QueueRetracted)
		case protocol.RecordCompaction:
			var d protocol.CompactionData
			if !read(r, &d) {
				break
			}
			if d.Messages < 1 || d.Messages > len(s.history) {
				s.logger.Warn("a compaction record does not match the conversation; recovery goes on without it", "seq", r.Seq, "messages", d.Messages, "conversation", len(s.history))
				break
			}
			s.history = agent.Compacted(s.history, d.Messages, d.Summary)
		case protocol.RecordCompactionSetting:
			var d protocol.CompactionSettingData
			if read(r, &d) && (&protocol.CompactionSetInput{SessionID: s.id, CompactAt: d.CompactAt}).Validate() == nil {
				s.compactAt = d.CompactAt
			}
		case protocol.RecordAssistantMessage, protocol.RecordToolResults:
			var d protocol.MessageData
			if !read(r, &d) {
				break
			}
			m := message(d)
			s.history = append(s.history, m)
			plan.follow(m)
		}
	}
	if plan.ok {
		s.todo.Set(plan.items)
	}
	// No turn runs in a new worker: steering that waited leads the next.
	s.leadWithSteeringLocked()
	if open != nil {
		cause := previousExit
		if cause == "" {
			cause = "the worker running it exited"
		}
		if _, err := s.log.Append(protocol.RecordTurnEnd, open.TurnID, protocol.TurnEndData{Status: protocol.TurnFailed, Error: cause}); err != nil {
			return fmt.Errorf("closing the interrupted turn: %w", err)
		}
		if err := s.log.Sync(); err != nil {
			return err
		}
		open.Status, open.Error = protocol.TurnFailed, cause
	}
	return nil
}

// planReplay finds the agent's plan in a conversation: the items of the
// last todo call that succeeded.
type planReplay struct {
	calls map[string][]protocol.TodoItem // todo calls awaiting their result
	items []protocol.TodoItem
	ok    bool
}

func (p *planReplay) follow(m llm.Message) {
	for _, part := range m.Parts {
		switch {
		case part.ToolCall != nil && part.ToolCall.Name == "todo":
			var args struct {
				Items []protocol.TodoItem `json:"items"`
			}
			if json.Unmarshal(part.ToolCall.Arguments, &args) == nil {
				if p.calls == nil {
					p.calls = map[string][]protocol.TodoItem{}
				}
				p.calls[part.ToolCall.ID] = args.Items
			}
		case part.ToolResult != nil:
			if items, ok := p.calls[part.ToolResult.CallID]; ok && !part.ToolResult.IsError {
				p.items, p.ok = items, true
			}
			delete(p.calls, part.ToolResult.CallID)
		}
	}
}
