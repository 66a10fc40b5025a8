package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/protocol"
)

// floodResults are the figures of the flood part: a tool printing as fast
// as it can, read by a client that reads at most floodRate.
type floodResults struct {
	fresh, anchorFresh    []time.Duration // how old the newest timestamp was when it reached the reader
	delivered, skipped    int64           // the reader's bytes of output, and those it was told it skipped
	ended                 bool            // it saw the turn's end
	closed                string          // why its subscription closed, if it did
	hostGrowth, wrkGrowth int64           // RSS peak − before
	err                   string
}

// floodRate is the reader's pace: a phone, an editor, a script.
const floodRate = 1 << 20

// floodSeconds is how long the tool prints.
const floodSeconds = 10

// floodCommand prints a timestamp, then 64 KiB of filler, again and again
// for floodSeconds: `yes` with a clock in it.
const floodCommand = `y=$(head -c 65535 /dev/zero | tr '\0' y); end=$((SECONDS+%d)); while [ $SECONDS -lt $end ]; do echo "T $EPOCHREALTIME"; echo "$y"; done`

// goalFreshness bounds how old the newest output may be when it reaches a
// reader slower than its producer.
const goalFreshness = 100 * time.Millisecond

// goalFloodGrowth bounds the growth of host and worker RSS while a tool
// floods them.
const goalFloodGrowth = 32 << 20

// floodPart measures a slow reader on a flooding tool: it must stay
// subscribed, see the turn's end, and see output that is fresh (it skips
// ahead), while host and worker stay within their memory bound. The
// anchor is the same command's output read at the same pace straight
// from a pipe, as a terminal would read it: lossless, the producer held
// back by the pipe.
func (b *bench) floodPart(ctx context.Context) error {
	r := &b.res.flood
	if !bashHasEpochRealtime() {
		r.err = "bash without $EPOCHREALTIME (bash 5 or later is needed)"
		return nil
	}
	command := fmt.Sprintf(floodCommand, floodSeconds)
	dir := filepath.Join(b.base, "flood")
	home, runDir, err := newPlace(dir)
	if err != nil {
		return err
	}
	script, err := fauxScript(
		reply{"the flood", []step{{"tool": "bash", "arguments": step{"command": command}, "id": "flood"}}},
		reply{"after the flood", []step{textStep("done", 1)}},
	)
	if err != nil {
		return err
	}
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, script, 0o644); err != nil {
		return err
	}
	c, info, err := b.openHost(ctx, home, runDir, "AGENTD_FAUX_SCRIPT="+scriptPath, "AGENTD_WORKER_IDLE_GRACE=10m")
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()

	fmt.Printf("flood: a bash tool prints a timestamp and 64 KiB, again and again, for %ds; one client reads its subscription at %d KiB/s; anchor: the same command read at that pace from a pipe\n", floodSeconds, floodRate>>10)
	fresh, err := pipeFreshness(ctx, command)
	if err != nil {
		r.err = "the anchor: " + err.Error()
		return nil
	}
	r.anchorFresh = fresh

	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: dir, Approval: protocol.ApprovalAll})
	if err != nil {
		return err
	}
	nc, lr, subID, err := rawSubscribe(ctx, info.Endpoint, s.SessionID)
	if err != nil {
		return err
	}
	defer nc.Close()
	worker := workerPIDOf(home, s.SessionID)
	hostBefore, wrkBefore := rssBytes(info.PID), rssBytes(worker)
	var peakHost, peakWrk int64
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			peakHost, peakWrk = max(peakHost, rssBytes(info.PID)), max(peakWrk, rssBytes(worker))
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	}()
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "flood", Content: protocol.Content{Text: "flood"}}); err != nil {
		close(stop)
		return err
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Minute))
	readErr := r.readFlood(lr, subID)
	close(stop)
	<-sampled
	r.hostGrowth, r.wrkGrowth = peakHost-hostBefore, peakWrk-wrkBefore
	if readErr != nil {
		r.err = readErr.Error()
	}
	a, g := summarize(r.anchorFresh), summarize(r.fresh)
	fmt.Printf("  agentd: freshness p50 %s p99 %s (n=%d), %s delivered, %s skipped, turn end seen %v; host RSS +%s, worker +%s\n",
		dur(g.p50), dur(g.p99), g.n, mib(r.delivered), mib(r.skipped), r.ended, mib(r.hostGrowth), mib(r.wrkGrowth))
	fmt.Printf("  pipe:   freshness p50 %s p99 %s (n=%d)\n", dur(a.p50), dur(a.p99), a.n)
	return nil
}

// readFlood reads subscription id's frames from lr until the turn ends,
// noting how old each update's newest timestamp is.
func (r *floodResults) readFlood(lr *protocol.LineReader, id string) error {
	start := time.Now()
	for {
		line, err := lr.Next()
		if err != nil {
			return err
		}
		var f struct {
			Kind           string          `json:"kind"`
			SubscriptionID string          `json:"subscriptionId"`
			Reason         string          `json:"reason"`
			Delta          json.RawMessage `json:"delta"`
		}
		if json.Unmarshal(line, &f) != nil || f.SubscriptionID != id {
			continue
		}
		switch f.Kind {
		case protocol.KindSubscriptionClosed:
			r.closed = f.Reason
			return fmt.Errorf("the subscription closed: %s", f.Reason)
		case protocol.KindSessionDelta:
			var d protocol.SessionDelta
			if err := json.Unmarshal(f.Delta, &d); err != nil {
				return err
			}
			switch {
			case d.Event == protocol.EventRunEnd:
				r.ended = true
				return nil
			case d.Event == protocol.EventToolCallUpdate && d.ToolCall != nil:
				r.delivered += int64(len(d.ToolCall.Output))
				r.skipped += d.Skipped
				if at, ok := newestStamp([]byte(d.ToolCall.Output)); ok && time.Since(start) > time.Second {
					r.fresh = append(r.fresh, time.Since(at))
				}
			}
		}
	}
}

// pipeFreshness runs command with its output in a pipe read at floodRate,
// and returns how old the newest timestamp of each read was.
func pipeFreshness(ctx context.Context, command string) ([]time.Duration, error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var fresh []time.Duration
	pr := &pacedReader{r: out, rate: floodRate}
	buf := make([]byte, 16<<10)
	var carry []byte
	start := time.Now()
	for {
		n, err := pr.Read(buf)
		carry = append(carry, buf[:n]...)
		if i := bytes.LastIndexByte(carry, '\n'); i >= 0 {
			if at, ok := newestStamp(carry[:i]); ok && time.Since(start) > time.Second {
				fresh = append(fresh, time.Since(at))
			}
			carry = append(carry[:0], carry[i+1:]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return fresh, cmd.Wait()
}

// newestStamp returns the last "T <seconds.micros>" line's time in b.
func newestStamp(b []byte) (time.Time, bool) {
	for {
		i := bytes.LastIndex(b, []byte("T "))
		if i < 0 {
			return time.Time{}, false
		}
		if i == 0 || b[i-1] == '\n' {
			line := b[i+2:]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			if s, err := strconv.ParseFloat(string(line), 64); err == nil {
				sec, frac := math.Modf(s)
				return time.Unix(int64(sec), int64(frac*1e9)), true
			}
		}
		b = b[:i]
	}
}

// pacedReader reads at most rate bytes a second, in reads of at most 16
// KiB.
type pacedReader struct {
	r     io.Reader
	rate  float64
	mu    sync.Mutex
	start time.Time
	n     int64
}

func (p *pacedReader) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(b) > 16<<10 {
		b = b[:16<<10]
	}
	if p.start.IsZero() {
		p.start = time.Now()
	}
	if ahead := time.Duration(float64(p.n)/p.rate*float64(time.Second)) - time.Since(p.start); ahead > 0 {
		time.Sleep(ahead)
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	return n, err
}

// rawSubscribe opens a raw connection to endpoint with a ready
// subscription to session, read at floodRate.
func rawSubscribe(ctx context.Context, endpoint, session string) (net.Conn, *protocol.LineReader, string, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", endpoint)
	if err != nil {
		return nil, nil, "", err
	}
	lr := protocol.NewLineReader(&pacedReader{r: nc, rate: floodRate})
	send := func(s string) (json.RawMessage, error) {
		if _, err := nc.Write([]byte(s + "\n")); err != nil {
			return nil, err
		}
		line, err := lr.Next()
		return append(json.RawMessage(nil), line...), err
	}
	if _, err := send(`{"kind":"hello","clientInstanceId":"flood","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"agentd.interactive","surface":"sdk"}`); err != nil {
		nc.Close()
		return nil, nil, "", err
	}
	line, err := send(fmt.Sprintf(`{"requestId":"open","operation":"subscription.open","input":{"sessionId":%q,"transcript":{"kind":"none"}}}`, session))
	var resp struct {
		Result protocol.SubscriptionOpenResult `json:"result"`
	}
	if err == nil {
		err = json.Unmarshal(line, &resp)
	}
	if err == nil {
		_, err = send(fmt.Sprintf(`{"requestId":"ready","operation":"subscription.ready","input":{"subscriptionId":%q}}`, resp.Result.SubscriptionID))
	}
	if err != nil {
		nc.Close()
		return nil, nil, "", err
	}
	return nc, lr, resp.Result.SubscriptionID, nil
}

// workerPIDOf returns the pid of session's registered worker, or 0.
func workerPIDOf(homeDir, session string) int {
	b, err := os.ReadFile(home.WorkerRegistrationPath(homeDir, session))
	var reg home.WorkerRegistration
	if err != nil || json.Unmarshal(b, &reg) != nil {
		return 0
	}
	return reg.PID
}

func (r *floodResults) rows() []row {
	nan := math.NaN()
	if r.err != "" {
		return []row{{"flood: a 1 MB/s reader on a flooding tool", "failed", r.err, nan, "-", "FAIL"}}
	}
	g, a := summarize(r.fresh), summarize(r.anchorFresh)
	return []row{
		{"flood: a 1 MB/s reader on a flooding tool: stays subscribed, sees the turn's end", fmt.Sprintf("end seen %v", r.ended), "-", nan, "yes", table.Verdict(r.ended && r.closed == "")},
		{fmt.Sprintf("  newest output's age at the reader, p50 (n=%d)", g.n), dur(g.p50), dur(a.p50) + " pipe", table.Ratio(g.p50, a.p50), "-", "info"},
		{"  p99", dur(g.p99), dur(a.p99) + " pipe", table.Ratio(g.p99, a.p99), "≤ 100 ms", table.Verdict(g.n > 0 && g.p99 <= goalFreshness)},
		{"  output delivered / skipped ahead", mib(r.delivered) + " / " + mib(r.skipped), "-", nan, "-", "info"},
		{"  host RSS growth", mib(r.hostGrowth), "-", nan, "≤ 32 MiB", table.Verdict(r.hostGrowth <= goalFloodGrowth)},
		{"  worker RSS growth", mib(r.wrkGrowth), "-", nan, "≤ 32 MiB", table.Verdict(r.wrkGrowth <= goalFloodGrowth)},
	}
}
