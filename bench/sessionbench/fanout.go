package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// fanoutResults are the figures of the fan-out part.
type fanoutResults struct {
	subs, conns, stamps int
	interval            time.Duration
	clean, stalled      []time.Duration // latencies at every reader, rounds without and with the stalled subscriber
	whileStalled        []time.Duration // of the stalled rounds, those that arrived before the eviction
	lost                int             // timestamps that did not reach a reader
	evictions           []time.Duration // turn.start → fanout.slowConsumers counted the stalled subscription
	fullToEvict         []time.Duration // its socket's receive queue stopped growing → counted
	notEvicted          int             // stalled rounds without an eviction
	closedFrames        int             // stalled rounds whose connection got subscription.closed slow_consumer
	rssClean, rssStall  []int64         // the host's RSS growth during a round: peak − before
	turnTime            []time.Duration // turn.start → every reader saw run_end
	cpuHost, cpuWorker  time.Duration   // over every round
	cpuClient           time.Duration
	framesIn            int   // timestamp lines taken at the readers, over every round
	hostWrites          int64 // the host's write system calls, over every round
	rssSource           string
	err                 string
}

// The fan-out turn's command: like the latency turn's, with the pause
// between lines a parameter.
const fanStampsCommand = `exec 9<> <(:); for i in $(seq %d); do echo $EPOCHREALTIME; read -t %s -u 9; done`

func (b *bench) fanoutScript() ([]byte, error) {
	return fauxScript(
		reply{"the fan-out turn: timestamps from the worker's side", []step{
			textStep("timing ", 1),
			{"tool": "bash", "arguments": step{"command": fmt.Sprintf(fanStampsCommand, b.cfg.fanStamps, strconv.FormatFloat(b.cfg.fanInterval.Seconds(), 'f', -1, 64))}, "id": "stamps"},
		}},
		reply{"after the tool ran", []step{textStep("done", 1)}},
	)
}

// fanoutPart measures one session streaming to many subscribers: a turn
// whose bash tool prints the worker-side wall clock once a millisecond,
// read by fanSubs subscriptions spread over fanConns raw connections, each
// line's latency taken at every reader. Rounds without and with one more
// connection that subscribes and then never reads alternate; for the
// stalled one the host's fan-out counters give the time of its eviction,
// and the host's RSS is sampled throughout.
func (b *bench) fanoutPart(ctx context.Context) error {
	r := &b.res.fanout
	r.subs, r.conns, r.stamps, r.interval = b.cfg.fanSubs, b.cfg.fanConns, b.cfg.fanStamps, b.cfg.fanInterval
	if !bashHasEpochRealtime() {
		r.err = "bash without $EPOCHREALTIME (bash 5 or later is needed)"
		return nil
	}
	dir := filepath.Join(b.base, "f")
	home, runDir, err := newPlace(dir)
	if err != nil {
		return err
	}
	scriptPath := filepath.Join(dir, "script.json")
	script, err := b.fanoutScript()
	if err != nil {
		return err
	}
	if err := os.WriteFile(scriptPath, script, 0o644); err != nil {
		return err
	}
	c, info, err := b.openHost(ctx, home, runDir, "AGENTD_FAUX_SCRIPT="+scriptPath, "AGENTD_WORKER_IDLE_GRACE=10m")
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()

	rss := func() int64 {
		if r.rssSource != "/proc" {
			res, err := client.Call(ctx, c, protocol.OpHostResourcesQuery, protocol.HostResourcesQueryInput{})
			if err == nil {
				r.rssSource = "host.resources.query"
				return int64(res.RSSBytes)
			} else if r.rssSource == "" {
				fmt.Printf("fanout: host.resources.query: %v; the host's RSS is read from /proc instead\n", err)
			}
			r.rssSource = "/proc"
		}
		return rssBytes(info.PID)
	}
	rss()

	fmt.Printf("fanout: %d rounds of each kind, alternating: a fresh session whose bash tool prints %d worker-side timestamps %s apart, read by %d subscriptions over %d connections; in the stalled rounds one more connection subscribes and never reads\n",
		b.cfg.fanRounds, b.cfg.fanStamps, b.cfg.fanInterval, b.cfg.fanSubs, b.cfg.fanConns)
	for round := range 2 * b.cfg.fanRounds {
		stalled := round%2 == 1
		fr, err := b.fanoutRound(ctx, c, home, info, stalled, rss)
		label := "without"
		if stalled {
			label = "with"
		}
		line := fmt.Sprintf("  round %d, %s the stalled subscriber: ", round/2+1, label)
		if err != nil {
			r.err = err.Error()
			fmt.Println(line + "FAILED: " + err.Error())
			return nil
		}
		s := summarize(fr.latencies)
		line += fmt.Sprintf("p50 %s p99 %s max %s (n=%d, lost %d) in %s; CPU host %s worker %s this client %s; host RSS +%s", dur(s.p50), dur(s.p99), dur(s.max), s.n, fr.lost, dur(fr.turn), dur(fr.cpuHost), dur(fr.cpuWorker), dur(fr.cpuClient), mib(fr.rssGrowth))
		r.lost += fr.lost
		r.turnTime = append(r.turnTime, fr.turn)
		r.cpuHost += fr.cpuHost
		r.cpuWorker += fr.cpuWorker
		r.cpuClient += fr.cpuClient
		r.framesIn += s.n
		r.hostWrites += fr.hostWrites
		if stalled {
			r.stalled = append(r.stalled, fr.latencies...)
			r.rssStall = append(r.rssStall, fr.rssGrowth)
			if fr.evicted.IsZero() {
				r.notEvicted++
				line += "; the stalled subscription was NOT evicted"
			} else {
				ev := fr.evicted.Sub(fr.start)
				r.evictions = append(r.evictions, ev)
				line += fmt.Sprintf("; evicted %s after turn.start", dur(ev))
				if !fr.full.IsZero() {
					r.fullToEvict = append(r.fullToEvict, fr.evicted.Sub(fr.full))
					line += fmt.Sprintf(", %s after its socket filled (%d KiB queued)", dur(fr.evicted.Sub(fr.full)), fr.queued>>10)
				}
				r.whileStalled = append(r.whileStalled, fr.before...)
				ws := summarize(fr.before)
				line += fmt.Sprintf("; before the eviction p50 %s p99 %s (n=%d)", dur(ws.p50), dur(ws.p99), ws.n)
			}
			if fr.closedFrame {
				r.closedFrames++
				line += "; its connection got subscription.closed slow_consumer"
			} else {
				line += "; its connection got no subscription.closed slow_consumer"
			}
		} else {
			r.clean = append(r.clean, fr.latencies...)
			r.rssClean = append(r.rssClean, fr.rssGrowth)
		}
		fmt.Println(line)
	}
	return nil
}

// fanRound is what one round of the fan-out part saw.
type fanRound struct {
	latencies   []time.Duration
	before      []time.Duration // those that arrived before the eviction
	lost        int
	start       time.Time // turn.start sent
	full        time.Time // the stalled socket's receive queue last grew
	queued      int       // bytes it held then
	evicted     time.Time // the first poll that counted the eviction
	closedFrame bool
	rssGrowth   int64
	turn        time.Duration
	cpuHost     time.Duration
	cpuWorker   time.Duration
	cpuClient   time.Duration
	hostWrites  int64
}

func (b *bench) fanoutRound(ctx context.Context, c *client.Conn, home string, info client.HostInfo, stalled bool, rss func() int64) (fanRound, error) {
	endpoint := info.Endpoint
	var fr fanRound
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{
		Cwd: b.work, Title: "fanout", Model: "faux/echo", Approval: protocol.ApprovalAll,
	})
	if err != nil {
		return fr, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Call(rctx, c, protocol.OpSessionRemove, protocol.SessionRef{SessionID: s.SessionID})
	}()

	turnID := "t" + randomHex(6)
	readers := make([]*fanReader, b.cfg.fanConns)
	for i := range readers {
		n := b.cfg.fanSubs / b.cfg.fanConns
		if i < b.cfg.fanSubs%b.cfg.fanConns {
			n++
		}
		rd, err := dialFan(ctx, endpoint, s.SessionID, n, turnID, b.cfg.fanStamps)
		if err != nil {
			return fr, fmt.Errorf("reader %d: %w", i, err)
		}
		defer rd.close()
		readers[i] = rd
	}
	var stall *rawConn
	if stalled {
		var err error
		if stall, err = dialRaw(ctx, endpoint); err != nil {
			return fr, err
		}
		defer stall.close()
		id, err := stall.open(s.SessionID)
		if err != nil {
			return fr, err
		}
		if err := stall.request(string(protocol.OpSubscriptionReady), protocol.SubscriptionRef{SubscriptionID: id}, nil); err != nil {
			return fr, err
		}
		// From here on it never reads.
	}
	for _, rd := range readers {
		go rd.run()
	}
	for _, rd := range readers {
		if err := rd.readied(ctx); err != nil {
			return fr, err
		}
	}

	diag, err := client.Call(ctx, c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{Limit: 1})
	if err != nil {
		return fr, err
	}
	slow0 := diag.Fanout.SlowConsumers
	rss0 := rss()
	peak := rss0

	workerPid := workerPID(home, s.SessionID)
	h0, w0, c0, sw0 := procCPU(info.PID), procCPU(workerPid), selfCPU(), writeCalls(info.PID)
	fr.start = time.Now()
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{
		SessionID: s.SessionID, TurnID: turnID, Content: protocol.Content{Text: "stamps"}, Approval: protocol.ApprovalAll,
	}); err != nil {
		return fr, err
	}
	// Until every reader has seen run_end: poll the fan-out counters and
	// the host's RSS, and watch the stalled socket's receive queue.
	allDone := make(chan error, 1)
	go func() {
		for _, rd := range readers {
			if err := rd.wait(ctx); err != nil {
				allDone <- err
				return
			}
		}
		allDone <- nil
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	lastQueued := -1
	for {
		select {
		case err := <-allDone:
			if err != nil {
				return fr, err
			}
		case <-tick.C:
			if m := rss(); m > peak {
				peak = m
			}
			if stall != nil && fr.evicted.IsZero() {
				if q := stall.queued(); q > lastQueued {
					lastQueued, fr.full, fr.queued = q, time.Now(), q
				}
				diag, err := client.Call(ctx, c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{Limit: 1})
				if err == nil && diag.Fanout.SlowConsumers > slow0 {
					fr.evicted = time.Now()
				}
			}
			continue
		case <-ctx.Done():
			return fr, fmt.Errorf("the turn did not reach every reader: %w", ctx.Err())
		}
		break
	}
	fr.turn = time.Since(fr.start)
	fr.cpuHost, fr.cpuWorker, fr.cpuClient = procCPU(info.PID)-h0, procCPU(workerPid)-w0, selfCPU()-c0
	fr.rssGrowth = peak - rss0
	fr.hostWrites = writeCalls(info.PID) - sw0
	for _, rd := range readers {
		fr.latencies = append(fr.latencies, rd.lat...)
		for i, at := range rd.at {
			if !fr.evicted.IsZero() && at.Before(fr.evicted) {
				fr.before = append(fr.before, rd.lat[i])
			}
		}
		for _, n := range rd.lines {
			fr.lost += max(b.cfg.fanStamps-n, 0)
		}
	}
	if stall != nil {
		fr.closedFrame = stall.findClosed(protocol.ClosedSlowConsumer)
	}
	return fr, nil
}

// rawConn is a connection to the host spoken to directly, without the Go
// client: its reads cost the bench as little as they can.
type rawConn struct {
	nc  *net.UnixConn
	lr  *protocol.LineReader
	req int
}

func dialRaw(ctx context.Context, endpoint string) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", endpoint)
	if err != nil {
		return nil, err
	}
	rc := &rawConn{nc: nc.(*net.UnixConn), lr: protocol.NewLineReader(nc)}
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: "sessionbench-" + randomHex(4),
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive, Surface: protocol.SurfaceSDK,
	})
	if _, err := nc.Write(append(hello, '\n')); err != nil {
		nc.Close()
		return nil, err
	}
	line, err := rc.lr.Next()
	if err != nil || !bytes.Contains(line, []byte(`"kind":"accepted"`)) {
		nc.Close()
		return nil, fmt.Errorf("handshake: %s %v", line, err)
	}
	return rc, nil
}

func (rc *rawConn) close() { rc.nc.Close() }

// send writes a request and returns its id.
func (rc *rawConn) send(op string, in any) (string, error) {
	rc.req++
	id := "r" + strconv.Itoa(rc.req)
	raw, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	line, _ := json.Marshal(struct {
		RequestID string          `json:"requestId"`
		Operation string          `json:"operation"`
		Input     json.RawMessage `json:"input"`
	}{id, op, raw})
	_, err = rc.nc.Write(append(line, '\n'))
	return id, err
}

// request sends a request and reads up to its response; it is for a
// connection whose subscriptions are not ready, so nothing else comes.
func (rc *rawConn) request(op string, in, out any) error {
	id, err := rc.send(op, in)
	if err != nil {
		return err
	}
	for {
		line, err := rc.lr.Next()
		if err != nil {
			return err
		}
		var resp struct {
			RequestID string          `json:"requestId"`
			OK        bool            `json:"ok"`
			Result    json.RawMessage `json:"result"`
			Error     json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &resp) != nil || resp.RequestID != id {
			continue
		}
		if !resp.OK {
			return fmt.Errorf("%s: %s", op, resp.Error)
		}
		if out != nil {
			return json.Unmarshal(resp.Result, out)
		}
		return nil
	}
}

// open opens a subscription to session, with no transcript, and returns
// its id.
func (rc *rawConn) open(session string) (string, error) {
	var res protocol.SubscriptionOpenResult
	err := rc.request(string(protocol.OpSubscriptionOpen), protocol.SubscriptionOpenInput{SessionID: session, Transcript: protocol.TranscriptBootstrap{Kind: "none"}}, &res)
	return res.SubscriptionID, err
}

// queued returns the bytes waiting in the socket's receive queue.
func (rc *rawConn) queued() int {
	raw, err := rc.nc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// findClosed reads what the connection holds, for up to two seconds, and
// reports whether a subscription.closed frame with reason is among it.
func (rc *rawConn) findClosed(reason string) bool {
	rc.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	want := []byte(`"reason":"` + reason + `"`)
	for {
		line, err := rc.lr.Next()
		if err != nil {
			return false
		}
		if bytes.Contains(line, []byte(`"kind":"`+protocol.KindSubscriptionClosed+`"`)) && bytes.Contains(line, want) {
			return true
		}
	}
}

// fanReader is one reader connection of the fan-out part, with several
// subscriptions to one session. It reads every frame, and takes the
// latency of each timestamp line of the tool's output on arrival.
type fanReader struct {
	*rawConn
	turnID string
	subs   map[string]int // subscription id → index
	ready  []string       // readies' request ids
	readyc chan error     // the readies' outcome, sent once
	once   sync.Once

	partial [][]byte // per subscription: the output's unfinished line
	lines   []int    // per subscription: timestamp lines seen
	ended   int      // subscriptions that saw run_end
	lat     []time.Duration
	at      []time.Time
	done    chan struct{}
	err     error
}

// dialFan connects a reader with n subscriptions to session and sends
// their subscription.ready; run reads their answers and the frames, about
// stamps timestamp lines a subscription.
func dialFan(ctx context.Context, endpoint, session string, n int, turnID string, stamps int) (*fanReader, error) {
	rc, err := dialRaw(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	rd := &fanReader{rawConn: rc, turnID: turnID, subs: map[string]int{}, readyc: make(chan error, 1), partial: make([][]byte, n), lines: make([]int, n), done: make(chan struct{})}
	// The latencies' room is taken and touched now: grown while the lines
	// arrive, each growth would copy the whole slice into fresh pages, and
	// where a page fault costs tens of µs the reader would stall for
	// milliseconds, a stall the latencies would then blame on agentd.
	rd.lat, rd.at = touched[time.Duration](n*stamps+n), touched[time.Time](n*stamps+n)
	ids := make([]string, n)
	for i := range n {
		if ids[i], err = rc.open(session); err != nil {
			rc.close()
			return nil, err
		}
		rd.subs[ids[i]] = i
	}
	for _, id := range ids {
		rid, err := rc.send(string(protocol.OpSubscriptionReady), protocol.SubscriptionRef{SubscriptionID: id})
		if err != nil {
			rc.close()
			return nil, err
		}
		rd.ready = append(rd.ready, rid)
	}
	return rd, nil
}

var (
	fanSubID  = []byte(`"subscriptionId":"`)
	fanOutput = []byte(`"output":"`)
	fanClosed = []byte(`"kind":"` + protocol.KindSubscriptionClosed + `"`)
)

func (rd *fanReader) run() {
	defer close(rd.done)
	readies := 0
	for {
		line, err := rd.lr.Next()
		at := time.Now()
		if err != nil {
			rd.fail(err)
			return
		}
		if !bytes.HasPrefix(line, []byte(`{"kind":`)) { // a response
			if readies < len(rd.ready) {
				readies++
				if !bytes.Contains(line, []byte(`"ok":true`)) {
					rd.fail(fmt.Errorf("subscription.ready: %s", line))
					return
				}
				if readies == len(rd.ready) {
					rd.once.Do(func() { rd.readyc <- nil })
				}
			}
			continue
		}
		sub := rd.subOf(line)
		if sub < 0 {
			continue
		}
		switch {
		case bytes.Contains(line, evToolCallUpdate):
			out, ok := outputOf(line)
			if !ok {
				d, err := decodeDelta(line)
				if err != nil || d.ToolCall == nil {
					continue
				}
				out = []byte(d.ToolCall.Output)
			}
			p := append(rd.partial[sub], out...)
			for {
				i := bytes.IndexByte(p, '\n')
				if i < 0 {
					break
				}
				if ts, ok := parseEpochRealtime(string(p[:i])); ok {
					rd.lat = append(rd.lat, at.Sub(ts))
					rd.at = append(rd.at, at)
					rd.lines[sub]++
				}
				p = p[i+1:]
			}
			rd.partial[sub] = append(rd.partial[sub][:0], p...)
		case bytes.Contains(line, evRunEnd) && bytes.Contains(line, []byte(rd.turnID)):
			rd.ended++
			if rd.ended == len(rd.subs) {
				return
			}
		case bytes.Contains(line, fanClosed):
			rd.fail(fmt.Errorf("a reader's subscription closed: %s", line))
			return
		}
	}
}

// touched returns an empty slice of capacity n whose memory has been
// written once.
func touched[T any](n int) []T {
	s := make([]T, n)
	var zero T
	for i := range s {
		s[i] = zero
	}
	return s[:0]
}

func (rd *fanReader) fail(err error) {
	rd.err = err
	rd.once.Do(func() { rd.readyc <- err })
}

// subOf returns the index of the frame's subscription, or -1.
func (rd *fanReader) subOf(line []byte) int {
	i := bytes.Index(line, fanSubID)
	if i < 0 {
		return -1
	}
	rest := line[i+len(fanSubID):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return -1
	}
	if k, ok := rd.subs[string(rest[:j])]; ok {
		return k
	}
	return -1
}

// readied waits for the answers to the reader's subscription.ready.
func (rd *fanReader) readied(ctx context.Context) error {
	select {
	case err := <-rd.readyc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait waits until every subscription of the reader saw the turn's run_end.
func (rd *fanReader) wait(ctx context.Context) error {
	select {
	case <-rd.done:
		if rd.ended < len(rd.subs) {
			return fmt.Errorf("a reader stopped after %d of %d run_end: %w", rd.ended, len(rd.subs), rd.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// outputOf returns the tool output a tool_call_update frame carries,
// unescaping only "\n"; ok is false when it holds another escape (or is
// not where expected), and the caller decodes the frame.
func outputOf(line []byte) ([]byte, bool) {
	i := bytes.LastIndex(line, fanOutput)
	if i < 0 {
		return nil, false
	}
	s := line[i+len(fanOutput):]
	out := make([]byte, 0, len(s))
	for k := 0; k < len(s); k++ {
		switch s[k] {
		case '"':
			return out, true
		case '\\':
			if k+1 < len(s) && s[k+1] == 'n' {
				out = append(out, '\n')
				k++
				continue
			}
			return nil, false
		default:
			out = append(out, s[k])
		}
	}
	return nil, false
}

// rows are the fan-out part's rows of the results table.
func (r *fanoutResults) rows() []row {
	var rows []row
	nan := math.NaN()
	if r.err != "" {
		return append(rows, row{"fan-out to subscribers", "failed", r.err, nan, "-", "FAIL"})
	}
	clean, st := summarize(r.clean), summarize(r.stalled)
	if clean.n == 0 || st.n == 0 {
		return rows
	}
	p99Ratio := table.Ratio(st.p99, clean.p99)
	rows = append(rows,
		row{fmt.Sprintf("fan-out to %d subs on %d conns, 1 stalled: latency p50 (n=%d)", r.subs, r.conns, st.n), dur(st.p50), dur(clean.p50) + " none stalled", table.Ratio(st.p50, clean.p50), "-", "info"},
		row{"  p99, stalled subscriber present", dur(st.p99), dur(clean.p99) + " none stalled", p99Ratio, "≤ 5 ms", table.Verdict(st.p99 <= goalLatencyP99)},
		row{"  p99 ratio, with ÷ without the stalled one", dur(st.p99), dur(clean.p99) + " none stalled", p99Ratio, "≤ 1.5×", table.Verdict(p99Ratio <= goalFanP99Ratio)},
		row{"  max", dur(st.max), dur(clean.max) + " none stalled", table.Ratio(st.max, clean.max), "-", "info"},
	)
	if ws := summarize(r.whileStalled); ws.n > 0 {
		rows = append(rows, row{"  p99 before the eviction", dur(ws.p99), dur(clean.p99) + " none stalled", table.Ratio(ws.p99, clean.p99), "-", "info"})
	}
	lost := "every timestamp reached every reader"
	if r.lost > 0 {
		lost = fmt.Sprintf("%d timestamps lost", r.lost)
	}
	rows = append(rows, row{"  lossless at the readers", lost, "-", nan, "lossless", table.Verdict(r.lost == 0)})
	evicted := fmt.Sprintf("not evicted in %d of %d rounds", r.notEvicted, r.notEvicted+len(r.evictions))
	evVerdict := "FAIL"
	if r.notEvicted == 0 && len(r.evictions) > 0 {
		ev := slices.Max(r.evictions)
		evicted = fmt.Sprintf("%s (worst of %d)", dur(ev), len(r.evictions))
		evVerdict = table.Verdict(ev <= goalEviction)
	}
	rows = append(rows, row{"  stalled subscriber evicted, after turn.start", evicted, "-", nan, "≤ 5 s", evVerdict})
	if len(r.fullToEvict) > 0 {
		rows = append(rows, row{"    after its socket stopped taking frames", dur(slices.Max(r.fullToEvict)) + " (worst)", "5s backlog age bound", nan, "-", "info"})
	}
	rows = append(rows, row{"    its connection got subscription.closed slow_consumer", fmt.Sprintf("%d of %d rounds", r.closedFrames, r.notEvicted+len(r.evictions)), "-", nan, "-", "info"})
	if r.framesIn > 0 {
		per := func(d time.Duration) string {
			return fmt.Sprintf("%.2fµs", float64(d)/float64(time.Microsecond)/float64(r.framesIn))
		}
		rows = append(rows, row{"  CPU per line and subscriber: host / worker / this client", per(r.cpuHost) + " / " + per(r.cpuWorker) + " / " + per(r.cpuClient), "-", nan, "-", "info"})
		rows = append(rows, row{"  host write(2) calls per line and subscriber", fmt.Sprintf("%.2f", float64(r.hostWrites)/float64(r.framesIn)), "-", nan, "-", "info"})
		rows = append(rows, row{"  lines/s the tool printed (median round)", fmt.Sprintf("%.0f/s", float64(r.stamps)/medianDur(r.turnTime).Seconds()), "-", nan, "-", "info"})
	}
	if len(r.rssStall) > 0 {
		g, a := slices.Max(r.rssStall), slices.Max(r.rssClean)
		rows = append(rows, row{fmt.Sprintf("  host RSS growth during a round (%s), worst", r.rssSource), mib(g), mib(a) + " none stalled", nan, "≤ 32 MiB", table.Verdict(g <= goalFanRSS)})
	}
	return rows
}

// writeCalls returns the write system calls pid made (syscw of
// /proc/<pid>/io), or 0.
func writeCalls(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("syscw:")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
