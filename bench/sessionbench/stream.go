package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/protocol"
)

// streamResults are the figures of the stream part.
type streamResults struct {
	deltas     int
	rates      []float64 // deltas/s reaching the client, first to last delta, per round that completed
	anchor     []float64 // the raw stream's frames/s, per round
	workerRate []float64 // deltas/s of the worker's own turn, turn_start → turn_end in its transcript
	paced      []float64 // deltas/s reaching the client when the worker paces them (bursts of pacedBurst, 1ms apart)
	pacedErr   string
	turnTimes  []time.Duration
	streamErr  string   // why a streamed turn did not reach the client whole
	diagnosis  []string // what the host and the worker said about it
	delivered  int      // deltas that reached the client in the round that failed
	lossless   bool     // every round delivered every delta's text
	frames     int      // message_update frames of the last round (fewer than deltas when coalesced)
	latency    summary
	latencyErr string
	status     summary // host.status round trips on the same connection
	cpuDeltas  int     // deltas the CPU times below are for
	workerCPU  time.Duration
	hostCPU    time.Duration
	clientCPU  time.Duration
}

// The latency turn's command: it prints the worker-side wall clock
// (bash's $EPOCHREALTIME, microseconds) once a millisecond, sleeping with
// `read -t` on a pipe nobody writes, so that no process is forked per line.
const stampsCommand = `exec 9<> <(:); for i in $(seq %d); do echo $EPOCHREALTIME; read -t 0.001 -u 9; done`

// pacedBurst is the number of deltas the paced turn emits between its 1ms
// delays.
const pacedBurst = 100

// stallTimeout ends a turn whose stream has delivered nothing for this long.
const stallTimeout = 10 * time.Second

type step = map[string]any

type reply struct {
	Comment string `json:"comment"`
	Steps   []step `json:"steps"`
}

func textStep(s string, repeat int) step {
	m := step{"text": s}
	if repeat > 1 {
		m["repeat"] = repeat
	}
	return m
}

// fauxScript encodes a faux script of replies.
func fauxScript(replies ...reply) ([]byte, error) {
	return json.MarshalIndent(struct {
		Comment string  `json:"comment"`
		Replies []reply `json:"replies"`
	}{"sessionbench", replies}, "", "  ")
}

// The scripts of the three kinds of session: each session has a worker of
// its own, which reads the script when it starts.
func (b *bench) throughputScript() ([]byte, error) {
	return fauxScript(
		reply{"warm-up turn", []step{textStep("x", 1000)}},
		reply{"the streamed turn", []step{textStep("x", b.cfg.deltas)}},
	)
}

func (b *bench) pacedScript() ([]byte, error) {
	steps := make([]step, 0, 2*b.cfg.deltas/pacedBurst)
	for range b.cfg.deltas / pacedBurst {
		steps = append(steps, textStep("x", pacedBurst), step{"delay": "1ms"})
	}
	return fauxScript(
		reply{"warm-up turn", []step{textStep("x", 1000)}},
		reply{"the paced turn", steps},
	)
}

func (b *bench) latencyScript() ([]byte, error) {
	return fauxScript(
		reply{"the latency turn: timestamps from the worker's side", []step{
			textStep("timing ", 1),
			{"tool": "bash", "arguments": step{"command": fmt.Sprintf(stampsCommand, b.cfg.stamps)}, "id": "stamps"},
		}},
		reply{"after the tool ran", []step{textStep("done", 1)}},
	)
}

// streamPart measures a scripted faux turn streaming many one-byte text
// deltas to a client subscribed through the Go client, beside a raw
// unix-socket stream of the same frames read the same way; and the latency
// from the worker to the client, beside host.status round trips on the
// same connection.
func (b *bench) streamPart(ctx context.Context) error {
	r := &b.res.stream
	r.deltas, r.lossless = b.cfg.deltas, true
	dir := filepath.Join(b.base, "s")
	home, runDir, err := newPlace(dir)
	if err != nil {
		return err
	}
	// Every worker reads this file when it starts; it is rewritten before
	// each session is created.
	scriptPath := filepath.Join(dir, "script.json")
	first, err := b.throughputScript()
	if err != nil {
		return err
	}
	if err := os.WriteFile(scriptPath, first, 0o644); err != nil { // the host reads it too
		return err
	}
	stampsOK := bashHasEpochRealtime()
	if !stampsOK {
		r.latencyErr = "bash without $EPOCHREALTIME (bash 5 or later is needed)"
	}

	c, info, err := b.openHost(ctx, home, runDir, "AGENTD_FAUX_SCRIPT="+scriptPath, "AGENTD_WORKER_IDLE_GRACE=10m")
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()

	if b.cfg.profile != "" {
		f, err := os.Create(filepath.Join(b.cfg.profile, "client.cpu.pprof"))
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	// open creates a session whose worker plays script, subscribes to it
	// and starts its worker.
	open := func(title string, script func() ([]byte, error)) (*subscription, error) {
		text, err := script()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(scriptPath, text, 0o644); err != nil {
			return nil, err
		}
		return subscribe(ctx, c, home, b.work, title)
	}

	fmt.Printf("stream: %d rounds; in each, fresh sessions (approval all), each with its own worker: one streams %d one-byte text deltas in one turn; one streams them in bursts of %d, 1ms apart; one runs bash printing %d worker-side timestamps 1ms apart. Anchors: a raw unix-socket stream of %d copies of agentd's delta frame read like the Go client reads; %d host.status round trips on the same connection\n",
		b.cfg.rounds, b.cfg.deltas, pacedBurst, b.cfg.stamps, b.cfg.deltas, b.cfg.statusRTTs)
	var latencies, rtts []time.Duration
	for round := range b.cfg.rounds {
		rtts = append(rtts, statusRTTs(ctx, c, b.cfg.statusRTTs)...)

		// The streamed turn.
		sub, err := open(fmt.Sprintf("stream %d", round), b.throughputScript)
		if err != nil {
			return err
		}
		warm, err := sub.turn(ctx, "warm up")
		if err != nil {
			return fmt.Errorf("warm-up turn: %w", err)
		}
		workerPid := workerPID(home, sub.session)
		w0, h0, c0 := procCPU(workerPid), procCPU(info.PID), selfCPU()
		tr, err := sub.turn(ctx, "stream")
		line := fmt.Sprintf("  round %d: ", round+1)
		if err != nil {
			r.lossless = false
			if r.streamErr == "" {
				r.streamErr, r.delivered = err.Error(), tr.text
			}
			line += fmt.Sprintf("streamed turn FAILED after %d of %d deltas reached the client: %v", tr.text, b.cfg.deltas, err)
		} else {
			r.workerCPU += procCPU(workerPid) - w0
			r.hostCPU += procCPU(info.PID) - h0
			r.clientCPU += selfCPU() - c0
			r.cpuDeltas += tr.text
			// The model's deltas that reached the client (each carries one
			// byte of text; merged updates carry several), from turn.start
			// to the last of them: frames count less when updates merge.
			rate := float64(tr.text) / tr.last.Sub(tr.start).Seconds()
			r.rates = append(r.rates, rate)
			r.turnTimes = append(r.turnTimes, tr.end.Sub(tr.start))
			r.frames = tr.frames
			if tr.text != b.cfg.deltas {
				r.lossless = false
			}
			line += fmt.Sprintf("%d deltas in %d frames, text %d bytes, %.0f deltas/s (turn.start → run_end %s)", b.cfg.deltas, tr.frames, tr.text, rate, dur(tr.end.Sub(tr.start)))
		}
		wr, ended := sub.workerRate(tr.turnID, b.cfg.deltas)
		if ended {
			r.workerRate = append(r.workerRate, wr)
			line += fmt.Sprintf("; the worker's turn alone %.0f deltas/s", wr)
		}
		var diagnosis []string
		if err != nil {
			diagnosis = sub.diagnose(ctx, tr.start, ended)
			if r.diagnosis == nil {
				r.diagnosis = diagnosis
			}
		}
		sub.close(ctx)

		anchor, err := b.rawStream(ctx, dir, warm.sample, b.cfg.deltas)
		if err != nil {
			return fmt.Errorf("raw stream anchor: %w", err)
		}
		r.anchor = append(r.anchor, anchor)
		line += fmt.Sprintf("; raw stream %.0f frames/s", anchor)

		// The paced turn.
		if sub, err = open(fmt.Sprintf("paced %d", round), b.pacedScript); err != nil {
			return err
		}
		if _, err := sub.turn(ctx, "warm up"); err != nil {
			return fmt.Errorf("warm-up turn: %w", err)
		}
		if pt, err := sub.turn(ctx, "paced"); err != nil {
			if r.pacedErr == "" {
				r.pacedErr = fmt.Sprintf("%v (%d of %d deltas arrived)", err, pt.text, b.cfg.deltas)
			}
			line += fmt.Sprintf("; paced turn FAILED after %d deltas: %v", pt.text, err)
		} else {
			rate := float64(pt.text) / pt.last.Sub(pt.first).Seconds()
			r.paced = append(r.paced, rate)
			line += fmt.Sprintf("; paced %.0f deltas/s", rate)
		}
		sub.close(ctx)

		// The latency turn.
		if stampsOK {
			if sub, err = open(fmt.Sprintf("latency %d", round), b.latencyScript); err != nil {
				return err
			}
			st, err := sub.turn(ctx, "stamps")
			if err != nil {
				return fmt.Errorf("latency turn: %w", err)
			}
			latencies = append(latencies, st.latencies...)
			sub.close(ctx)
			ls := summarize(st.latencies)
			line += fmt.Sprintf("; latency p50 %s p99 %s (n=%d)", dur(ls.p50), dur(ls.p99), ls.n)
		}
		fmt.Println(line)
		for _, d := range diagnosis {
			fmt.Println("    " + d)
		}
	}
	r.latency, r.status = summarize(latencies), summarize(rtts)
	fmt.Printf("  host.status round trip p50 %s p99 %s (n=%d)\n", dur(r.status.p50), dur(r.status.p99), r.status.n)
	return nil
}

// subscription is a session with one subscription open on c.
type subscription struct {
	c       *client.Conn
	w       *client.Watcher
	home    string
	session string
	id      string
}

func subscribe(ctx context.Context, c *client.Conn, home, cwd, title string) (*subscription, error) {
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{
		Cwd: cwd, Title: title, Model: "faux/echo", Approval: protocol.ApprovalAll,
	})
	if err != nil {
		return nil, err
	}
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		return nil, err
	}
	w := c.Watch(open.SubscriptionID)
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		w.Close()
		return nil, err
	}
	return &subscription{c: c, w: w, home: home, session: s.SessionID, id: open.SubscriptionID}, nil
}

// close closes the subscription and removes the session, which stops its
// worker.
func (s *subscription) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client.Call(ctx, s.c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: s.id})
	s.w.Close()
	client.Call(ctx, s.c, protocol.OpSessionRemove, protocol.SessionRef{SessionID: s.session})
}

// diagnose gathers what explains a stream that stopped: whether the
// worker finished the turn, what the host now says of the session, and the
// diagnostics the host and the session's worker (dialled on its own
// socket through the host's link) recorded since the turn started.
func (s *subscription) diagnose(ctx context.Context, since time.Time, ended bool) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []string
	if ended {
		out = append(out, "the worker finished the turn: its transcript holds the turn_end record")
	} else {
		out = append(out, "the worker did not finish the turn within a minute")
	}
	sess, err := client.Call(ctx, s.c, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.session})
	if err == nil {
		out = append(out, fmt.Sprintf("the host reports the session %q", sess.Status))
	}
	// A query the host forwards to the worker tells whether the host's
	// connection to it still works.
	_, err = client.Call(ctx, s.c, protocol.OpSessionTodoQuery, protocol.SessionRef{SessionID: s.session})
	if err != nil {
		out = append(out, fmt.Sprintf("the host's connection to the worker fails: session.todo.query: %v", err))
	} else {
		out = append(out, "the host's connection to the worker works: it forwarded session.todo.query")
	}
	recent := func(who string, res protocol.DiagnosticsQueryResult, err error) {
		if err != nil {
			out = append(out, fmt.Sprintf("%s diagnostics: %v", who, err))
			return
		}
		n := 0
		for _, d := range res.Diagnostics {
			if d.Time.Before(since) {
				continue
			}
			out = append(out, fmt.Sprintf("%s diagnostic: %s %s", who, d.Level, d.Message))
			n++
		}
		if n == 0 {
			out = append(out, who+" diagnostics: none since the turn started")
		}
	}
	diagnostics := protocol.DiagnosticsQueryInput{Limit: 20}
	res, err := client.Call(ctx, s.c, protocol.OpHostDiagnosticsQuery, diagnostics)
	recent("host", res, err)
	// The worker is asked last, through a link like its host's: a worker
	// takes the latest such connection for its host's, so this one
	// supersedes the host's own. What the host says is gathered before,
	// and the session is removed after.
	var reg struct {
		Endpoint string `json:"endpoint"`
	}
	raw, err := os.ReadFile(filepath.Join(s.home, "workers", s.session+".json"))
	if err == nil && json.Unmarshal(raw, &reg) == nil && reg.Endpoint != "" {
		wc, err := link.Dial(ctx, reg.Endpoint)
		if err != nil {
			out = append(out, fmt.Sprintf("worker: %v", err))
		} else {
			res, err := link.Call(ctx, wc, protocol.OpHostDiagnosticsQuery, diagnostics)
			recent("worker", res, err)
			wc.Close()
		}
	}
	return out
}

// workerRate reads the session's transcript and returns deltas divided by
// the time from turnID's turn_start record to its turn_end: how fast the
// worker produced the turn, whatever reached the client. It waits up to a
// minute for the turn to end.
func (s *subscription) workerRate(turnID string, deltas int) (float64, bool) {
	path := filepath.Join(s.home, "sessions", s.session, "transcript.jsonl")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		raw, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		var start, end time.Time
		for line := range bytes.SplitSeq(raw, []byte("\n")) {
			if !bytes.Contains(line, []byte(turnID)) || !bytes.Contains(line, []byte(`"type":"turn_`)) {
				continue
			}
			var rec struct {
				Time time.Time `json:"time"`
				Type string    `json:"type"`
			}
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			switch rec.Type {
			case protocol.RecordTurnStart:
				start = rec.Time
			case protocol.RecordTurnEnd:
				end = rec.Time
			}
		}
		if !start.IsZero() && !end.IsZero() {
			return float64(deltas) / end.Sub(start).Seconds(), true
		}
	}
	return 0, false
}

// statusRTTs times n sequential host.status requests on c.
func statusRTTs(ctx context.Context, c *client.Conn, n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := c.Status(ctx); err != nil {
			break
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// turnResult is what a client saw of one turn.
type turnResult struct {
	turnID                  string
	start, first, last, end time.Time
	frames                  int // message_update frames with text
	text                    int // text bytes they carried
	sample                  []byte
	latencies               []time.Duration // of the worker-side timestamps
}

var (
	evMessageUpdate  = []byte(`"delta":{"event":"` + protocol.EventMessageUpdate + `"`)
	evToolCallUpdate = []byte(`"delta":{"event":"` + protocol.EventToolCallUpdate + `"`)
	evRunEnd         = []byte(`"delta":{"event":"` + protocol.EventRunEnd + `"`)
)

// runTurn starts a turn with prompt and reads the subscription until its
// run_end. Text deltas are recognised and measured without decoding the
// frame (the client already decoded its head), so that this reader keeps
// up; the bash tool's output is decoded and each timestamp line in it
// gives one latency: the frame's arrival here minus the time the worker's
// child printed the line.
//
// A stream that delivers nothing for stallTimeout ends the turn with an
// error saying so, as does a watcher that fell behind.
func (s *subscription) turn(ctx context.Context, prompt string) (turnResult, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, 5*time.Minute, errors.New("the turn took over 5 minutes"))
	defer cancel()
	turnID := "t" + randomHex(6)
	tr := turnResult{turnID: turnID, start: time.Now()}
	if _, err := client.Call(ctx, s.c, protocol.OpTurnStart, protocol.TurnStartInput{
		SessionID: s.session, TurnID: turnID, Content: protocol.Content{Text: prompt}, Approval: protocol.ApprovalAll,
	}); err != nil {
		return tr, err
	}
	// A watchdog ends the wait when frames stop coming.
	ctx, stall := context.WithCancelCause(ctx)
	defer stall(nil)
	var lastFrame atomic.Int64
	lastFrame.Store(time.Now().UnixNano())
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if time.Since(time.Unix(0, lastFrame.Load())) > stallTimeout {
					stall(fmt.Errorf("stalled: no frame for %s", stallTimeout))
					return
				}
			}
		}
	}()
	var partial []byte
	for {
		f, err := s.w.Next(ctx)
		at := time.Now()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				err = cause
			}
			if errors.Is(err, client.ErrWatcherSlow) {
				err = fmt.Errorf("this client's watcher fell %d frames behind and was ended (%w)", 1024, err)
			}
			return tr, err
		}
		lastFrame.Store(at.UnixNano())
		switch f.Kind {
		case protocol.KindSessionDelta:
		case protocol.KindSubscriptionClosed:
			return tr, fmt.Errorf("subscription closed: %s", f.Raw)
		default:
			continue
		}
		raw := f.Raw
		switch {
		case bytes.Contains(raw, evMessageUpdate):
			n, ok := textLen(raw)
			if !ok {
				d, err := decodeDelta(raw)
				if err != nil {
					return tr, err
				}
				n = len(d.Text)
			}
			if n == 0 {
				continue // a thinking delta
			}
			if tr.frames == 0 {
				tr.first = at
				tr.sample = bytes.Clone(raw)
			}
			tr.frames++
			tr.text += n
			tr.last = at
		case bytes.Contains(raw, evToolCallUpdate):
			d, err := decodeDelta(raw)
			if err != nil {
				return tr, err
			}
			if d.ToolCall == nil {
				continue
			}
			partial = append(partial, d.ToolCall.Output...)
			for {
				i := bytes.IndexByte(partial, '\n')
				if i < 0 {
					break
				}
				if ts, ok := parseEpochRealtime(string(partial[:i])); ok {
					tr.latencies = append(tr.latencies, at.Sub(ts))
				}
				partial = partial[i+1:]
			}
		case bytes.Contains(raw, evRunEnd):
			d, err := decodeDelta(raw)
			if err != nil {
				return tr, err
			}
			if d.Turn == nil || d.Turn.TurnID != turnID {
				continue
			}
			tr.end = at
			if d.Turn.Status != protocol.TurnCompleted {
				return tr, fmt.Errorf("turn %s: %s", d.Turn.Status, d.Turn.Error)
			}
			return tr, nil
		}
	}
}

func decodeDelta(raw []byte) (protocol.SessionDelta, error) {
	var fr protocol.SessionDeltaFrame
	var d protocol.SessionDelta
	if err := json.Unmarshal(raw, &fr); err != nil {
		return d, err
	}
	err := json.Unmarshal(fr.Delta, &d)
	return d, err
}

// textLen returns the length of a message_update frame's text without
// decoding the frame; ok is false when the text has escapes (or is not
// found where expected), and the caller decodes it.
func textLen(raw []byte) (int, bool) {
	i := bytes.Index(raw, []byte(`,"text":"`))
	if i < 0 {
		return 0, !bytes.Contains(raw, []byte(`"text":`))
	}
	s := raw[i+len(`,"text":"`):]
	j := bytes.IndexByte(s, '"')
	if j < 0 || bytes.IndexByte(s[:j], '\\') >= 0 {
		return 0, false
	}
	return j, true
}

// parseEpochRealtime parses bash's $EPOCHREALTIME ("1764475416.123456").
func parseEpochRealtime(s string) (time.Time, bool) {
	sec, frac, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok {
		sec, frac, ok = strings.Cut(strings.TrimSpace(s), ",")
	}
	if !ok || len(frac) != 6 {
		return time.Time{}, false
	}
	su, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return time.Unix(su, us*1000), true
}

func bashHasEpochRealtime() bool {
	out, err := exec.Command("bash", "-c", "echo $EPOCHREALTIME").Output()
	_, ok := parseEpochRealtime(string(out))
	return err == nil && ok
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
