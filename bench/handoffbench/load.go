package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// settleTimeout bounds each wait of a part for agentd to do something
// that takes it well under a second: far beyond that, so that only what
// never happens fails on it, on a loaded machine too.
const settleTimeout = time.Minute

// loadResult is what the replacement under load measured.
type loadResult struct {
	workers, killed       int             // live workers before, and those gone or replaced after
	handoff               handoff         // the replacement
	turns, turnsRunning   int             // turns, and those running when the upgrade began
	turnsCompleted        int             // turns recorded completed
	ptys, ptysRunning     int             // PTYs, and those printing when the upgrade began
	ptyMissing, ptyOrder  int             // numbered lines missing from the logs, or out of order
	ptyContinued          int             // watchers that saw the screen, then every line after it
	toScreen              []time.Duration // each PTY watcher's, stream lost → screen again
	clients, resumed      int             // followers, and those that resumed
	resumes               []time.Duration // each client's, lost → reopened
	afterReady            []time.Duration // each client's, new host ready → reopened
	recMissing, recRepeat int             // records followers missed or got again
	records, badLines     int             // records on disk, and lines that are not the next record
}

// load runs the replacement under load: sessions with live workers, some
// mid-turn, some with PTYs printing, one follower each, then `agentd
// upgrade`.
func (b *bench) load(ctx context.Context) (loadResult, error) {
	var r loadResult
	cfg := b.cfg
	ctx, cancel := context.WithTimeout(ctx, 3*settleTimeout)
	defer cancel()
	p, c, err := b.startPlace(ctx, "load")
	if err != nil {
		return r, err
	}
	defer p.stop()
	defer c.Close()
	ids := make([]string, cfg.sessions)
	for i := range ids {
		in := protocol.SessionCreateInput{Cwd: p.work, Title: fmt.Sprintf("handoff %d", i+1), Model: "faux/echo"}
		sess, err := client.Call(ctx, c, protocol.OpSessionCreate, in)
		if err != nil {
			return r, fmt.Errorf("creating a session: %w", err)
		}
		ids[i] = sess.SessionID
	}

	// One follower a session: its subscription starts the session's worker.
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	followers := make([]*follower, len(ids))
	var opening sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		opening.Go(func() {
			f, err := client.FollowSession(ctx, p.dial, id, client.SessionOptions{Resources: i < cfg.ptys})
			if err != nil {
				errs[i] = fmt.Errorf("following session %s: %w", id, err)
				return
			}
			followers[i] = newFollower(f)
		})
	}
	opening.Wait()
	var reading sync.WaitGroup
	defer func() {
		stopFollowing()
		reading.Wait()
		for _, w := range followers {
			if w != nil {
				w.f.Close()
			}
		}
	}()
	for _, w := range followers {
		if w != nil {
			reading.Go(func() { w.run(fctx) })
		}
	}
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	if err := waitFor(ctx, settleTimeout, "every session's worker", func() bool { return p.liveWorkers() == len(ids) }); err != nil {
		return r, err
	}
	b.say("load: %d sessions followed, each with a live worker\n", len(ids))

	// PTYs printing numbered lines, each watched by a client of its own.
	watches := make([]*ptyWatch, cfg.ptys)
	for i := range watches {
		in := protocol.ResourceStartInput{SessionID: ids[i], LaunchID: fmt.Sprintf("lines-%d", i), Command: ptyCommand(cfg.ptyLines), PTY: true, Cols: 80, Rows: 24}
		res, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, in)
		if err != nil {
			return r, fmt.Errorf("starting a PTY: %w", err)
		}
		w := &ptyWatch{p: p, session: ids[i], ref: res.Ref, lines: cfg.ptyLines, next: -1, done: make(chan struct{})}
		watches[i] = w
		reading.Go(func() { w.run(fctx) })
	}

	// Turns whose command prints numbered lines, after touching a file
	// that says it runs.
	turns := make(map[int]string, cfg.turns) // session index → turn id
	for i := cfg.ptys; i < cfg.ptys+cfg.turns; i++ {
		turns[i] = fmt.Sprintf("turn-%d", i)
		cmd := fmt.Sprintf("touch started-%d; for i in $(seq 1 %d); do echo line $i; sleep 0.01; done", i, cfg.turnLines)
		in := protocol.TurnStartInput{SessionID: ids[i], TurnID: turns[i], Content: protocol.Content{Text: "write numbered lines: run `" + cmd + "`"}, Approval: protocol.ApprovalAll}
		if _, err := client.Call(ctx, c, protocol.OpTurnStart, in); err != nil {
			return r, fmt.Errorf("starting a turn: %w", err)
		}
	}
	running := func() bool {
		for i := range turns {
			if _, err := os.Stat(filepath.Join(p.work, fmt.Sprintf("started-%d", i))); err != nil {
				return false
			}
		}
		for _, w := range watches {
			if missing, _, _ := checkPTYLog(p.ptyLogPath(w.session, w.ref), w.lines); missing > w.lines-20 {
				return false
			}
		}
		return true
	}
	if err := waitFor(ctx, settleTimeout, "the turns' commands and the PTYs to print", running); err != nil {
		return r, err
	}
	c.Close()

	before := p.workers()
	r.workers = len(before)
	r.turns, r.ptys, r.clients = len(turns), len(watches), len(followers)
	for i, turn := range turns {
		if followers[i].ended(turn) == "" {
			r.turnsRunning++
		}
	}
	for _, w := range watches {
		if missing, _, _ := checkPTYLog(p.ptyLogPath(w.session, w.ref), w.lines); missing > 0 {
			r.ptysRunning++
		}
	}
	b.say("load: %d sessions with live workers, %d turns and %d PTYs printing; agentd upgrade\n", len(ids), r.turnsRunning, r.ptysRunning)
	if r.handoff, err = p.upgrade(ctx); err != nil {
		return r, err
	}

	// Every client resumes, every turn ends, every PTY exits, and every
	// follower has every record on disk.
	resumed := func() bool {
		for _, w := range followers {
			if !w.resumed() && w.failed() == nil {
				return false
			}
		}
		return true
	}
	if err := waitFor(ctx, settleTimeout, "every client to resume", resumed); err != nil {
		return r, err
	}
	b.say("load: upgraded in %s; every client resumed\n", dur(r.handoff.took))
	ended := func() bool {
		for i, turn := range turns {
			if followers[i].ended(turn) == "" && followers[i].failed() == nil {
				return false
			}
		}
		return true
	}
	if err := waitFor(ctx, 2*settleTimeout, "the turns to end", ended); err != nil {
		return r, err
	}
	for _, w := range watches {
		select {
		case <-w.done:
		case <-ctx.Done():
			return r, fmt.Errorf("waiting for PTY %s of session %s to exit: %w", w.ref, w.session, ctx.Err())
		}
	}
	caughtUp := func() bool {
		for _, w := range followers {
			last, _, err := p.checkTranscript(w.id)
			if err != nil || (w.last() < last && w.failed() == nil) {
				return false
			}
		}
		return true
	}
	if err := waitFor(ctx, settleTimeout, "every follower to have every record", caughtUp); err != nil {
		return r, err
	}
	r.killed = p.killed(before)
	b.say("load: every turn ended, every PTY exited; checking\n")
	return r, r.tally(p, followers, watches, turns)
}

// tally counts what the followers and the PTY watchers saw against what
// is on disk, and fails when one of them stopped early.
func (r *loadResult) tally(p *place, followers []*follower, watches []*ptyWatch, turns map[int]string) error {
	var problems []string
	for i, w := range followers {
		if err := w.failed(); err != nil {
			problems = append(problems, fmt.Sprintf("the follower of session %s stopped: %v", w.id, err))
		}
		last, bad, err := p.checkTranscript(w.id)
		if err != nil {
			return err
		}
		w.mu.Lock()
		r.recMissing += w.missing + int(last-min(w.next-1, last))
		r.recRepeat += w.repeated
		r.resumes = append(r.resumes, w.resumes...)
		for _, at := range w.reopened {
			r.afterReady = append(r.afterReady, at.Sub(r.handoff.ready))
		}
		if len(w.resumes) > 0 {
			r.resumed++
		}
		if w.ends[turns[i]] == protocol.TurnCompleted {
			r.turnsCompleted++
		}
		w.mu.Unlock()
		r.records += int(last)
		r.badLines += bad
	}
	for _, w := range watches {
		missing, disordered, err := checkPTYLog(p.ptyLogPath(w.session, w.ref), w.lines)
		if err != nil {
			return err
		}
		r.ptyMissing += missing
		r.ptyOrder += disordered
		if w.continued() {
			r.ptyContinued++
		}
		w.mu.Lock()
		if w.err != nil {
			problems = append(problems, fmt.Sprintf("the watcher of PTY %s stopped: %v", w.ref, w.err))
		}
		if w.next >= 0 {
			r.toScreen = append(r.toScreen, w.toScreen)
		}
		w.mu.Unlock()
	}
	slices.Sort(r.resumes)
	slices.Sort(r.toScreen)
	slices.Sort(r.afterReady)
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
