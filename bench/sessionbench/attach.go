package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// attachResults are the figures of the attach part.
type attachResults struct {
	records   int     // transcript records of the attached session
	agentd    summary // `agentd attach ID`, exec → first full screen
	tmux      summary // `tmux attach`, exec → first full screen
	coldAgent summary // `agentd attach ID` with the session's worker stopped first
	// When the screen first showed any text, of the same runs.
	agentdFirst, tmuxFirst summary
	starts                 starts  // `agentd version` and a Go program that only prints
	page                   summary // the web page, navigation → the last reply shown
	pageErr                string  // why the page could not be measured
	err                    string  // why agentd attach could not be measured
	tmuxErr                string  // why the tmux anchor could not be measured
}

// The terminal both attaches draw on.
const attachCols, attachRows = 120, 40

// lastPrompt is the attached session's last prompt: the faux model's reply
// to it quotes it, so the screen shows the last reply when it shows this.
const lastPrompt = "the last question zq9"

// lastReplyMark is what the last reply starts with on the screen.
const lastReplyMark = `You said: "` + lastPrompt + `"`

// attachScreenDone reports whether a screen is the first full screen of an
// attach: the session's last reply and, below it, the input line.
func attachScreenDone(screen string) bool {
	i := strings.Index(screen, lastReplyMark)
	if i < 0 {
		return false
	}
	for line := range strings.SplitSeq(screen[i:], "\n") {
		if strings.HasPrefix(line, "> ") {
			return true
		}
	}
	return false
}

// attachPart times `agentd attach ID` in a real PTY (120x40, read through a
// terminal emulator) from exec until the screen shows the session's last
// reply and the input line, for a session of 1,000 transcript records with
// its host and worker running; beside it, `tmux attach` to a running tmux
// server whose pane holds the same screen, timed the same way. The two are
// interleaved, their order alternating round by round.
func (b *bench) attachPart(ctx context.Context) error {
	r := &b.res.attach
	dir := filepath.Join(b.base, "a")
	home, runDir, err := newPlace(dir)
	if err != nil {
		return err
	}
	c, _, err := b.openHost(ctx, home, runDir, "AGENTD_WORKER_IDLE_GRACE=10m")
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()

	t0 := time.Now()
	id, records, err := b.filledSession(ctx, c, home, b.cfg.attachRecords)
	if err != nil {
		return fmt.Errorf("filling a session: %w", err)
	}
	r.records = records
	fmt.Printf("attach: a session of %d transcript records (%d turns of the faux model, made in %s); %d rounds, each `agentd attach %s` and `tmux attach` in a %dx%d PTY, in alternating order, each timed from exec until the screen shows the last reply and the input line\n",
		records, records/4, time.Since(t0).Round(10*time.Millisecond), b.cfg.attachRuns, id, attachCols, attachRows)

	env := append(b.agentdEnv(home, runDir), "TERM=xterm-256color", "COLUMNS=", "LINES=")
	agentdAttach := func() (time.Duration, string, error) {
		return timeScreen(ctx, command(ctx, env, b.agentd, "attach", id), "\x1c")
	}
	// A first attach, untimed: it starts nothing the timed ones do not
	// find running, and its screen is the tmux pane's content.
	_, screen, err := agentdAttach()
	if err != nil {
		r.err = err.Error()
		fmt.Printf("  agentd attach: %v\n", err)
		if screen != "" {
			fmt.Printf("  its screen:\n%s\n", indent(screen))
		}
	}

	tm, err := startTmux(ctx, dir, screen)
	if err != nil {
		r.tmuxErr = err.Error()
		fmt.Printf("  tmux anchor: %v\n", err)
	} else {
		defer tm.stop()
		if _, _, err := tm.attach(ctx); err != nil { // warm-up
			r.tmuxErr = err.Error()
			fmt.Printf("  tmux attach: %v\n", err)
		}
	}

	var ag, tx, agFirst, txFirst, bf []time.Duration
	before := b.cfg.before
	if before != "" {
		if before, err = filepath.Abs(before); err != nil {
			return err
		}
	}
	for round := range b.cfg.attachRuns {
		sides := []func(){
			func() {
				if r.err != "" {
					return
				}
				d, screen, err := agentdAttach()
				if err != nil {
					r.err = err.Error()
					fmt.Printf("  round %d: agentd attach: %v\n%s\n", round+1, err, indent(screen))
					return
				}
				ag = append(ag, d)
				agFirst = append(agFirst, lastFirstText)
			},
			func() {
				if r.tmuxErr != "" {
					return
				}
				d, _, err := tm.attach(ctx)
				if err != nil {
					r.tmuxErr = err.Error()
					fmt.Printf("  round %d: tmux attach: %v\n", round+1, err)
					return
				}
				tx = append(tx, d)
				txFirst = append(txFirst, lastFirstText)
			},
		}
		if before != "" {
			// The earlier build, between the two: its attach and agentd's
			// each follow tmux's as often as they precede it.
			sides = append(sides[:1], func() {
				d, screen, err := timeScreen(ctx, command(ctx, env, before, "attach", id), "\x1c")
				if err != nil {
					fmt.Printf("  round %d: the -before attach: %v\n%s\n", round+1, err, indent(screen))
					return
				}
				bf = append(bf, d)
			}, sides[1])
		}
		if round%2 == 1 {
			slices.Reverse(sides)
		}
		for _, f := range sides {
			f()
		}
	}
	if before != "" {
		s := summarize(bf)
		fmt.Printf("  the -before build's attach p50 %s p90 %s (n=%d); this build's p50 %s: %.3f× the earlier\n",
			dur(s.p50), dur(s.p90), s.n, dur(summarize(ag).p50), float64(summarize(ag).p50)/float64(max(s.p50, 1)))
	}
	r.agentd, r.tmux = summarize(ag), summarize(tx)
	r.agentdFirst, r.tmuxFirst = summarize(agFirst), summarize(txFirst)
	for range b.cfg.attachRuns {
		r.starts.time(ctx, b, env)
	}
	fmt.Printf("  agentd attach p50 %s p90 %s max %s (n=%d); tmux attach p50 %s p90 %s max %s (n=%d)\n",
		dur(r.agentd.p50), dur(r.agentd.p90), dur(r.agentd.max), r.agentd.n, dur(r.tmux.p50), dur(r.tmux.p90), dur(r.tmux.max), r.tmux.n)

	// The web page, the same session, in headless Chromium.
	if r.page, err = b.pageFirstScreen(ctx, c, id, b.cfg.attachRuns); err != nil {
		r.pageErr = err.Error()
		fmt.Printf("  the web page: %v\n", err)
	} else {
		fmt.Printf("  the web page, navigation → the last reply shown: p50 %s p90 %s max %s (n=%d)\n", dur(r.page.p50), dur(r.page.p90), dur(r.page.max), r.page.n)
	}

	// With the session's worker stopped: the attach starts it (informational).
	if r.err == "" {
		var cold []time.Duration
		for range max(b.cfg.attachRuns/4, 3) {
			if err := stopWorker(ctx, c, home, id); err != nil {
				fmt.Printf("  stopping the worker: %v\n", err)
				break
			}
			d, screen, err := agentdAttach()
			if err != nil {
				fmt.Printf("  agentd attach, worker stopped: %v\n%s\n", err, indent(screen))
				break
			}
			cold = append(cold, d)
		}
		r.coldAgent = summarize(cold)
		if r.coldAgent.n > 0 {
			fmt.Printf("  agentd attach with the worker stopped first: p50 %s max %s (n=%d)\n", dur(r.coldAgent.p50), dur(r.coldAgent.max), r.coldAgent.n)
		}
	}
	return nil
}

// filledSession creates a session and runs turns of the faux model's
// default reply in it until its transcript holds at least records records
// (four a turn); the last turn's prompt is lastPrompt. It returns the
// session's id and how many records its transcript holds.
func (b *bench) filledSession(ctx context.Context, c *client.Conn, home string, records int) (string, int, error) {
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{
		Cwd: b.work, Title: "attach", Model: "faux/echo", Approval: protocol.ApprovalAll,
	})
	if err != nil {
		return "", 0, err
	}
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		return "", 0, err
	}
	w := c.Watch(open.SubscriptionID)
	defer w.Close()
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		return "", 0, err
	}
	sub := &subscription{c: c, w: w, home: home, session: s.SessionID, id: open.SubscriptionID}
	turns := (records + 3) / 4
	for i := range turns {
		prompt := fmt.Sprintf("question %d: what does the code in the parser package do with a line that ends in a backslash?", i+1)
		if i == turns-1 {
			prompt = lastPrompt
		}
		if _, err := sub.turn(ctx, prompt); err != nil {
			return "", 0, fmt.Errorf("turn %d: %w", i+1, err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client.Call(cctx, c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID})
	raw, err := os.ReadFile(filepath.Join(home, "sessions", s.SessionID, "transcript.jsonl"))
	if err != nil {
		return "", 0, err
	}
	return s.SessionID, strings.Count(string(raw), "\n"), nil
}

// stopWorker kills the session's worker and waits until the host has seen
// it go, so that the next attach starts a new one.
func stopWorker(ctx context.Context, c *client.Conn, home, id string) error {
	pid := workerPID(home, id)
	if pid <= 0 {
		return errors.New("no worker registered")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if !proc.Running(pid) { // reaped by its host, or a zombie it is about to reap
			_, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
			time.Sleep(50 * time.Millisecond) // the host notices the exit
			return err
		}
	}
	return errors.New("the worker did not go")
}

// lastFirstText is, for the last screen timeScreen timed, when it first
// showed any text.
var lastFirstText time.Duration

// timeScreen runs cmd in a PTY of attachCols×attachRows, its output drawn
// by a terminal emulator, and returns the time from exec until the screen
// first satisfies attachScreenDone, with that screen. Then it types detach
// (the program's detach keys), waits a moment for the program to exit, and
// kills it if it has not.
func timeScreen(ctx context.Context, cmd *exec.Cmd, detach string) (time.Duration, string, error) {
	return timeScreenUntil(ctx, cmd, detach, attachScreenDone, "the last reply and the input line")
}

// timeScreenUntil is timeScreen awaiting another screen: the first that
// satisfies screenDone, which shows what.
func timeScreenUntil(ctx context.Context, cmd *exec.Cmd, detach string, screenDone func(string) bool, what string) (time.Duration, string, error) {
	term := vt.NewEmulator(attachCols, attachRows)
	var mu sync.Mutex // guards term
	done := make(chan time.Duration, 1)
	var firstText time.Duration // the screen first showed any text
	exited := make(chan struct{})
	var waitErr error

	t0 := time.Now()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: attachCols, Rows: attachRows})
	if err != nil {
		return 0, "", err
	}
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	var wg sync.WaitGroup
	wg.Go(func() { // the program's output, onto the screen
		buf := make([]byte, 64<<10)
		found := false
		for {
			n, err := tty.Read(buf)
			if n > 0 {
				mu.Lock()
				term.Write(buf[:n])
				text := term.String()
				if firstText == 0 && strings.TrimSpace(text) != "" {
					firstText = time.Since(t0)
				}
				if !found && screenDone(text) {
					found = true
					done <- time.Since(t0)
				}
				mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	})
	wg.Go(func() { // the terminal's answers to the program's queries
		buf := make([]byte, 4<<10)
		for {
			n, err := term.Read(buf)
			if err != nil {
				return
			}
			tty.Write(buf[:n])
		}
	})
	screen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return term.String()
	}
	finish := func() {
		tty.Write([]byte(detach))
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		tty.Close()
		mu.Lock()
		term.Close() // ends the answers' pump
		mu.Unlock()
		wg.Wait()
	}

	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case d := <-done:
		s := screen()
		finish()
		lastFirstText = firstText
		return d, s, nil
	case <-exited:
		s := screen()
		finish()
		return 0, s, fmt.Errorf("%s exited (%v) before its screen showed %s", filepath.Base(cmd.Path), waitErr, what)
	case <-timeout.C:
		s := screen()
		finish()
		return 0, s, fmt.Errorf("%s did not show %s within 20 s", filepath.Base(cmd.Path), what)
	case <-ctx.Done():
		finish()
		return 0, "", ctx.Err()
	}
}

// tmuxSide is a tmux server, run for the attach anchor on a socket of its
// own, with one session whose pane holds a screen.
type tmuxSide struct {
	sock string
	env  []string
	pid  int
}

// startTmux starts a tmux server with a session of one window sized so
// that a 120x40 client sees it whole (a status line takes one row), whose
// pane prints screen and then waits.
func startTmux(ctx context.Context, dir, screen string) (*tmuxSide, error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return nil, errors.New("tmux not installed")
	}
	if screen == "" || !attachScreenDone(screen) {
		// No screen from agentd: draw one of the same shape.
		var b strings.Builder
		for i := range 8 {
			fmt.Fprintf(&b, "── turn t%015d\n❯ question %d\n  You said: \"question %d\". That is a reply of the faux model, agentd's offline stand-in.\n── completed\n", i, i, i)
		}
		b.WriteString("  " + lastReplyMark + ".\n> a prompt: enter sends it, alt+enter queues it\nenter send · ctrl+\\ detach\n")
		screen = b.String()
	}
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) > attachRows-1 {
		lines = lines[len(lines)-(attachRows-1):]
	}
	file := filepath.Join(dir, "pane.txt")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return nil, err
	}
	t := &tmuxSide{sock: filepath.Join(dir, "tmux.sock")}
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "TERM=") {
			t.env = append(t.env, kv)
		}
	}
	t.env = append(t.env, "TERM=xterm-256color")
	out, err := command(ctx, t.env, "tmux", "-S", t.sock, "-f", "/dev/null", "new-session", "-d", "-s", "bench",
		"-x", fmt.Sprint(attachCols), "-y", fmt.Sprint(attachRows-1), "cat "+file+"; exec sleep 3600").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tmux new-session: %v: %s", err, out)
	}
	pid, err := command(ctx, t.env, "tmux", "-S", t.sock, "display-message", "-p", "#{pid}").Output()
	if err == nil {
		fmt.Sscan(string(pid), &t.pid)
	}
	tmuxServers.Store(t, true)
	time.Sleep(100 * time.Millisecond) // the pane prints its screen
	return t, nil
}

// attach times `tmux attach` to the server's session, detaching with
// prefix d.
func (t *tmuxSide) attach(ctx context.Context) (time.Duration, string, error) {
	return timeScreen(ctx, command(ctx, t.env, "tmux", "-S", t.sock, "attach-session", "-t", "bench"), "\x02d")
}

// tmuxServers holds the tmux servers still running, for cleanup.
var tmuxServers sync.Map // *tmuxSide → true

// stopTmuxAll stops every tmux server the run started and still runs.
func stopTmuxAll() {
	tmuxServers.Range(func(k, _ any) bool {
		k.(*tmuxSide).stop()
		return true
	})
}

// stop ends the tmux server, by its pid when it does not answer.
func (t *tmuxSide) stop() {
	tmuxServers.Delete(t)
	exec.Command("tmux", "-S", t.sock, "kill-server").Run()
	if t.pid > 0 && proc.Running(t.pid) {
		syscall.Kill(t.pid, syscall.SIGKILL)
	}
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    | " + l
	}
	return strings.Join(lines, "\n")
}
