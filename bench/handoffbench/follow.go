package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// follower is one session's client: a client.Follower read to the end,
// which counts the transcript records it brings against the sequence they
// should come in, and times each resumption.
type follower struct {
	id   string           // constant
	f    *client.Follower // constant; Next is run's alone
	done chan struct{}    // closed when run returns

	mu       sync.Mutex
	next     uint64            // guarded by mu: the record expected next
	missing  int               // guarded by mu: records skipped over
	repeated int               // guarded by mu: records brought again
	ends     map[string]string // guarded by mu: turns ended, with their status
	lostAt   time.Time         // guarded by mu: when the stream ended; zero while it runs
	resumes  []time.Duration   // guarded by mu: from each stream end to its reopening
	reopened []time.Time       // guarded by mu: when each reopening came
	err      error             // guarded by mu: why run stopped early
}

func newFollower(f *client.Follower) *follower {
	return &follower{id: f.SessionID(), f: f, done: make(chan struct{}), next: f.LastRecord() + 1, ends: map[string]string{}}
}

// run reads the session's events until ctx ends.
func (w *follower) run(ctx context.Context) {
	defer close(w.done)
	for {
		ev, err := w.f.Next(ctx)
		now := time.Now()
		w.mu.Lock()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				w.err = err
			}
			w.mu.Unlock()
			return
		case ev.Lost != nil:
			w.lostAt = now
		case ev.Reopened:
			if !w.lostAt.IsZero() {
				w.resumes = append(w.resumes, now.Sub(w.lostAt))
				w.reopened = append(w.reopened, now)
				w.lostAt = time.Time{}
			}
		case ev.Record != nil:
			w.count(ev.Record.Seq)
			if ev.Record.Type == protocol.RecordTurnEnd {
				var d protocol.TurnEndData
				json.Unmarshal(ev.Record.Data, &d)
				w.ends[ev.Record.TurnID] = d.Status
			}
		}
		w.mu.Unlock()
	}
}

// count counts record seq against the one expected; w.mu is held.
func (w *follower) count(seq uint64) {
	switch {
	case seq == w.next:
		w.next++
	case seq > w.next:
		w.missing += int(seq - w.next)
		w.next = seq + 1
	default:
		w.repeated++
	}
}

// ended returns the status turn ended with, "" while it has not.
func (w *follower) ended(turn string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ends[turn]
}

// last returns the last record received.
func (w *follower) last() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next - 1
}

// resumed reports whether the stream was opened again after it ended.
func (w *follower) resumed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.resumes) > 0 && w.lostAt.IsZero()
}

// failed returns why run stopped early, if it did.
func (w *follower) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// ptyLine matches a numbered line the PTYs print.
var ptyLine = regexp.MustCompile(`L(\d+)`)

// ptyCommand prints numbered lines L0…L(lines-1) on a PTY, one every 5 ms.
func ptyCommand(lines int) string {
	return fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo L$i; i=$((i+1)); sleep 0.005; done", lines)
}

// ptyWatch follows one PTY's output (client.Conn.WatchPTY) across
// reconnections: after one, it checks that the screen comes first, and
// that the output after it goes on from the screen's last line, with no
// line missing, to the last.
type ptyWatch struct {
	p            *place        // constant
	session, ref string        // constant
	lines        int           // constant: lines the PTY prints
	done         chan struct{} // closed when run returns

	mu          sync.Mutex
	streams     int           // guarded by mu: streams opened
	firstData   bool          // guarded by mu: no output yet on this stream
	beforeMax   int           // guarded by mu: the last line seen on the first stream
	screenFirst bool          // guarded by mu: a later stream began with the screen
	screenMax   int           // guarded by mu: the last line on that screen
	next        int           // guarded by mu: the line expected next after that screen; -1 before
	gaps        int           // guarded by mu: lines missing from the output after that screen
	carry       []byte        // guarded by mu: an output line not yet ended
	lostAt      time.Time     // guarded by mu: when the first stream ended
	toScreen    time.Duration // guarded by mu: from the first stream's end to the next screen
	exited      bool          // guarded by mu
	err         error         // guarded by mu: why run stopped early
}

// run watches the PTY until it exits or ctx ends, opening the stream
// again each time it ends.
func (w *ptyWatch) run(ctx context.Context) {
	defer close(w.done)
	for {
		c, s, err := w.open(ctx)
		if err != nil {
			w.fail(ctx, err)
			return
		}
		err = w.read(ctx, s)
		s.Close()
		c.Close()
		w.mu.Lock()
		exited := w.exited
		if !exited && w.lostAt.IsZero() {
			w.lostAt = time.Now()
		}
		w.mu.Unlock()
		if exited || ctx.Err() != nil {
			return
		}
		// Reopened after a lost connection or a replaced host, and nothing
		// else.
		var closed *client.ClosedError
		if errors.As(err, &closed) && closed.Reason != protocol.ClosedHostReplaced {
			w.fail(ctx, err)
			return
		}
	}
}

// open connects and opens the PTY's stream, retrying until it can or ctx
// ends.
func (w *ptyWatch) open(ctx context.Context) (*client.Conn, *client.PTYStream, error) {
	wait := 20 * time.Millisecond
	for {
		c, err := w.p.dial(ctx)
		if err == nil {
			var s *client.PTYStream
			if s, err = c.WatchPTY(ctx, w.session, w.ref); err == nil {
				w.mu.Lock()
				w.streams++
				w.firstData, w.carry = true, nil
				w.mu.Unlock()
				return c, s, nil
			}
			c.Close()
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		wait = min(2*wait, time.Second)
	}
}

// read reads one stream to its end.
func (w *ptyWatch) read(ctx context.Context, s *client.PTYStream) error {
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return err
		}
		w.mu.Lock()
		if ev.Resource != nil && ev.Resource.State == protocol.ResourceExited {
			w.exited = true
			w.mu.Unlock()
			return nil
		}
		if len(ev.Data) > 0 {
			w.output(ev.Data, ev.Screen)
		}
		w.mu.Unlock()
	}
}

// output takes in one output of the PTY; w.mu is held.
func (w *ptyWatch) output(data []byte, screen bool) {
	later := w.streams > 1
	if later && w.firstData {
		w.screenFirst = screen
	}
	w.firstData = false
	if screen {
		last := -1
		for _, m := range ptyLine.FindAllSubmatch(data, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			last = max(last, n)
		}
		if !later {
			w.beforeMax = max(w.beforeMax, last)
		} else if w.next < 0 {
			w.screenMax, w.next = last, last+1
			w.toScreen = time.Since(w.lostAt)
		}
		w.carry = nil
		return
	}
	w.carry = append(w.carry, data...)
	for {
		i := bytes.IndexByte(w.carry, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimRight(w.carry[:i], "\r")
		w.carry = w.carry[i+1:]
		m := ptyLine.FindSubmatch(line)
		if m == nil || len(m[0]) != len(line) {
			continue
		}
		n, _ := strconv.Atoi(string(m[1]))
		switch {
		case !later:
			w.beforeMax = max(w.beforeMax, n)
		case w.next >= 0:
			if n > w.next {
				w.gaps += n - w.next
			}
			w.next = max(w.next, n+1)
		}
	}
}

func (w *ptyWatch) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// continued reports whether, after reconnecting, the watcher saw the
// screen first, then every line after it to the last.
func (w *ptyWatch) continued() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams > 1 && w.screenFirst && w.screenMax >= w.beforeMax && w.gaps == 0 && w.next == w.lines && w.err == nil
}

// checkPTYLog counts the numbered lines missing from a PTY's output log
// on disk, and those out of order or repeated.
func checkPTYLog(path string, lines int) (missing, disordered int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return lines, 0, err
	}
	next := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		m := ptyLine.FindSubmatch(line)
		if m == nil || len(m[0]) != len(line) {
			continue
		}
		n, _ := strconv.Atoi(string(m[1]))
		switch {
		case n == next:
			next++
		case n > next:
			missing += n - next
			next = n + 1
		default:
			disordered++
		}
	}
	return missing + max(lines-next, 0), disordered, nil
}

// ptyLogPath is where session id's worker logs the output of resource ref.
func (p *place) ptyLogPath(id, ref string) string {
	return filepath.Join(p.home, "sessions", id, "resources", ref+".log")
}

// checkTranscript reads session id's transcript from disk and returns its
// last sequence, and how many lines are not a record with the sequence
// that should come next (1, 2, 3…).
func (p *place) checkTranscript(id string) (last uint64, bad int, err error) {
	b, err := os.ReadFile(filepath.Join(p.home, "sessions", id, "transcript.jsonl"))
	if err != nil {
		return 0, 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec protocol.TranscriptRecord
		if json.Unmarshal(line, &rec) != nil || rec.Seq != last+1 {
			bad++
		}
		last = max(last, rec.Seq)
	}
	return last, bad, nil
}
