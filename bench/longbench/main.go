// Command longbench measures a long session on the offline model: 1,000
// turns in one session whose model has a small context window, so that it
// compacts again and again. Every request the model is sent must stay
// within the compaction bound (the threshold share of the window, as the
// model counts it), and a turn's start in the long session — from
// turn.start to the model's first reply event, compactions included —
// must stay within 1.5× the first turn's start of a fresh session,
// measured in the same run, interleaved (a fresh session every few turns
// of the long one).
//
//	go run ./bench/longbench [-turns 1000] [-window 8192] [-every 10]
//
// Each session runs in a real worker (worker.Run, the code agentd worker
// runs) on a real socket, driven as its host drives it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

func main() {
	turns := flag.Int("turns", 1000, "turns of the long session")
	window := flag.Int("window", 8192, "the offline model's context window, in tokens")
	every := flag.Int("every", 10, "a fresh session's first turn after this many turns of the long one")
	flag.Parse()
	if err := run(*turns, *window, *every); err != nil {
		fmt.Fprintln(os.Stderr, "longbench:", err)
		os.Exit(1)
	}
}

// counting is the faux provider with the largest prompt it was sent kept,
// as it counted it, summaries apart.
type counting struct {
	*faux.Provider
	mu        sync.Mutex
	largest   int
	summaries int
}

func (c *counting) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	reply, err := c.Provider.Stream(ctx, req, emit)
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.System == llm.SummarySystem {
		c.summaries++
	} else {
		c.largest = max(c.largest, reply.Usage.InputTokens)
	}
	return reply, err
}

// session is a worker of one session and the host's side of it.
type session struct {
	conn   *link.Conn
	deltas chan protocol.SessionDelta
	cancel context.CancelFunc
	done   chan error
}

func start(dir string, model *counting) (*session, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return nil, err
	}
	reg := provider.NewRegistry()
	reg.Register(model)
	sock := filepath.Join(dir, "w.sock")
	cfg := worker.Config{
		Home: dir, Session: protocol.Session{SessionID: "s1", Cwd: cwd, Model: "faux/echo"}, Approval: protocol.ApprovalAll,
		SocketPath: sock, TranscriptPath: filepath.Join(dir, "transcript.jsonl"), Providers: reg, Tools: tools.Builtin(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{cancel: cancel, done: make(chan error, 1), deltas: make(chan protocol.SessionDelta, 1<<14)}
	go func() { s.done <- worker.Run(ctx, cfg) }()
	deadline := time.Now().Add(30 * time.Second)
	for s.conn == nil {
		if c, err := link.Dial(ctx, sock); err == nil {
			if st, err := c.Status(ctx); err == nil && st.State == protocol.StateReady {
				s.conn = c
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("the worker did not start")
		}
		time.Sleep(time.Millisecond)
	}
	open, err := link.Call(ctx, s.conn, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		s.stop()
		return nil, err
	}
	w := s.conn.Stream(open.SubscriptionID)
	go func() {
		for {
			f, err := w.Next(context.Background())
			if err != nil {
				return
			}
			var fr protocol.SessionDeltaFrame
			var d protocol.SessionDelta
			if json.Unmarshal(f.Raw, &fr) == nil && json.Unmarshal(fr.Delta, &d) == nil {
				s.deltas <- d
			}
		}
	}()
	if _, err := link.Call(ctx, s.conn, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *session) stop() error {
	if s.conn != nil {
		s.conn.Close()
	}
	s.cancel()
	return <-s.done
}

// turn runs one turn and returns its start: from turn.start to the
// model's first reply event. It reports whether the turn compacted.
func (s *session) turn(id, text string) (time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	if _, err := link.Call(ctx, s.conn, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: "s1", TurnID: id, Content: protocol.Content{Text: text}}); err != nil {
		return 0, false, err
	}
	var started time.Duration
	compacted := false
	for {
		select {
		case d := <-s.deltas:
			switch {
			case d.Event == protocol.EventMessageStart && started == 0:
				started = time.Since(t0)
			case d.Event == protocol.EventCompaction && d.Compaction.State == protocol.CompactionFinished:
				compacted = true
			case d.Event == protocol.EventCompaction && d.Compaction.State == protocol.CompactionFailed:
				return 0, false, fmt.Errorf("turn %s: compaction failed: %s", id, d.Compaction.Error)
			case d.Event == protocol.EventRunEnd && d.TurnID == id:
				if d.Turn.Status != protocol.TurnCompleted {
					return 0, false, fmt.Errorf("turn %s %s: %s", id, d.Turn.Status, d.Turn.Error)
				}
				return started, compacted, nil
			}
		case <-ctx.Done():
			return 0, false, fmt.Errorf("turn %s: %w", id, ctx.Err())
		}
	}
}

// prompt is a request of some 60 words, different each turn.
func prompt(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Step %d of the long task: look again at", i)
	for j := range 55 {
		fmt.Fprintf(&b, " part%d", (i+j)%97)
	}
	return b.String()
}

func run(turns, window, every int) error {
	root, err := os.MkdirTemp("", "longbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	script, err := faux.ParseScript(fmt.Appendf(nil, `{"contextWindow": %d}`, window))
	if err != nil {
		return err
	}
	long := &counting{Provider: faux.NewScripted(script)}
	fresh := &counting{Provider: faux.NewScripted(script)}
	ls, err := start(filepath.Join(root, "long"), long)
	if err != nil {
		return err
	}
	defer ls.stop()
	var longStarts, freshStarts []time.Duration
	compactions := 0
	for i := 1; i <= turns; i++ {
		d, compacted, err := ls.turn(fmt.Sprintf("t%d", i), prompt(i))
		if err != nil {
			return err
		}
		longStarts = append(longStarts, d)
		if compacted {
			compactions++
		}
		if i%every == 0 {
			fs, err := start(filepath.Join(root, fmt.Sprintf("fresh%d", i)), fresh)
			if err != nil {
				return err
			}
			d, _, err := fs.turn("t1", prompt(i))
			if serr := fs.stop(); err == nil {
				err = serr
			}
			if err != nil {
				return err
			}
			freshStarts = append(freshStarts, d)
		}
		if i%100 == 0 {
			fmt.Fprintf(os.Stderr, "%d turns: %d compactions, p50 turn start %v (fresh %v)\n", i, compactions, pct(longStarts, 50), pct(freshStarts, 50))
		}
	}
	bound := window * protocol.DefaultCompactAt / 100
	long.mu.Lock()
	largest, summaries := long.largest, long.summaries
	long.mu.Unlock()
	p50, f50 := pct(longStarts, 50), pct(freshStarts, 50)
	p90, f90 := pct(longStarts, 90), pct(freshStarts, 90)
	rows := []table.Row{
		{Metric: fmt.Sprintf("largest request of %d turns, tokens", turns), Agentd: fmt.Sprint(largest), Anchor: fmt.Sprintf("%d bound", bound),
			Ratio: float64(largest) / float64(bound), Goal: "≤ 1×", Verdict: table.Verdict(largest <= bound)},
		{Metric: "compactions (summaries asked)", Agentd: fmt.Sprintf("%d (%d)", compactions, summaries), Anchor: "-", Ratio: nan(), Goal: "info", Verdict: "info"},
		{Metric: "turn start p50", Agentd: p50.String(), Anchor: f50.String() + " fresh", Ratio: table.Ratio(p50, f50), Goal: "≤ 1.5×", Verdict: table.Verdict(table.Ratio(p50, f50) <= 1.5)},
		{Metric: "turn start p90", Agentd: p90.String(), Anchor: f90.String() + " fresh", Ratio: table.Ratio(p90, f90), Goal: "info", Verdict: "info"},
	}
	table.Print(os.Stdout, rows, 2)
	return nil
}

func nan() float64 { return table.Ratio(0, 0) }

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
