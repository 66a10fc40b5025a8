package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"

	"github.com/agentd-dev/agentd/bench/internal/table"
)

// The pty part's terminal figures, each beside tmux in the same run:
// `agentd pty` attaching to a busy PTY until its client shows the whole
// screen, against `tmux attach` to the same program in a tmux pane; and
// keys typed one at a time into `agentd shell`, each timed until its echo
// is on the client's screen, against the same through `tmux attach`.

const (
	goalEchoP99   = 2.0 // echo p99 through `agentd shell` ≤ 2× through tmux
	goalPTYScreen = 1.5 // `agentd pty` to a busy PTY's first whole screen ≤ 1.5× tmux attach

	// roleBusyScreen makes this binary the busy program: it redraws a
	// whole screen of numbered rows every busyFrameInterval, forever.
	roleBusyScreen    = "busy-screen"
	busyFrameInterval = 5 * time.Millisecond
	busyTop           = "zq-top"
	busyBottom        = "zq-bottom"

	echoPrompt = "zq> " // the shell's prompt, set by the first line typed
	echoLine   = 60     // keys typed on one line before it is erased
	echoBlock  = 50     // keys typed into one side before the other's turn
)

// ptyScreenResults are the figures of attaching to a busy PTY.
type ptyScreenResults struct {
	agentd, watch, tmux    summary // exec → the whole screen
	agentdFirst, tmuxFirst summary // exec → any text
	starts                 starts  // `agentd version` and a Go program that only prints
	frameBytes             int
	err, tmuxErr           string
}

// echoResults are the figures of keystroke echo.
type echoResults struct {
	agentd, tmux           summary
	agentdBlock, tmuxBlock []time.Duration // p99 of each block of keys
	agentdSlow, tmuxSlow   int             // keys whose echo took over echoSlow
	err, tmuxErr           string
}

// echoSlow is an echo a person notices as a stall: over a millisecond.
const echoSlow = time.Millisecond

// over counts the durations in d over limit.
func over(d []time.Duration, limit time.Duration) int {
	n := 0
	for _, x := range d {
		if x > limit {
			n++
		}
	}
	return n
}

// runBusyScreen is the busy program: it redraws its terminal whole, each
// row numbered and stamped with the frame's number, the first and last
// rows marked, until its terminal goes.
func runBusyScreen(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "%s: no arguments\n", roleBusyScreen)
		return 2
	}
	for n := 0; ; n++ {
		cols, rows := attachCols, attachRows
		if ws, err := pty.GetsizeFull(os.Stdout); err == nil && ws.Cols > 20 && ws.Rows > 2 {
			cols, rows = int(ws.Cols), int(ws.Rows)
		}
		if _, err := os.Stdout.Write(busyFrame(n, cols, rows)); err != nil {
			return 0
		}
		time.Sleep(busyFrameInterval)
	}
}

// busyFrame is frame n of the busy program: cursor home, then rows lines
// of cols-1 characters, the last without a line feed so nothing scrolls.
func busyFrame(n, cols, rows int) []byte {
	var b bytes.Buffer
	b.WriteString("\x1b[H")
	for r := range rows {
		line := busyRowPrefix(r, rows) + fmt.Sprintf("frame %08d ", n)
		for len(line) < cols-1 {
			line += "abcdefghij"
		}
		b.WriteString(line[:cols-1])
		if r < rows-1 {
			b.WriteString("\r\n")
		}
	}
	return b.Bytes()
}

// busyRowPrefix is how row r of a busy screen of rows rows begins.
func busyRowPrefix(r, rows int) string {
	label := "row"
	switch r {
	case 0:
		label = busyTop
	case rows - 1:
		label = busyBottom
	}
	return fmt.Sprintf("%s %02d ", label, r+1)
}

// busyScreenDone reports whether a screen shows a whole busy screen: every
// row of the terminal begins as the busy program draws it.
func busyScreenDone(screen string) bool {
	lines := strings.Split(screen, "\n")
	if len(lines) != attachRows {
		return false
	}
	for r, l := range lines {
		if !strings.HasPrefix(l, busyRowPrefix(r, attachRows)) {
			return false
		}
	}
	return true
}

// ptyScreenPart times `agentd pty ID REF`, in a PTY of this process read
// through a terminal emulator, from exec until the screen shows the whole
// of a PTY the busy program redraws without pause; `agentd pty --watch`
// the same (informational: no control taken); and, as the anchor, `tmux
// attach` to a tmux server (its own, -f /dev/null, no status line) whose
// pane runs the same program; and `agentd version`, a process start
// alone. The four are interleaved, their order turning round by round.
func (b *bench) ptyScreenPart(ctx context.Context, c *client.Conn, home, runDir, dir string) error {
	r := &b.res.pty.screen
	r.frameBytes = len(busyFrame(0, attachCols, attachRows))
	busy := "exec " + shQuote(b.self) + " " + roleBusyScreen
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{
		Cwd: b.work, Title: "busy pty", Model: "faux/echo", Approval: protocol.ApprovalAll,
	})
	if err != nil {
		return err
	}
	res, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: s.SessionID, LaunchID: "busy", Command: busy, PTY: true, Cols: attachCols, Rows: attachRows,
	})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		client.Call(sctx, c, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: s.SessionID, Ref: res.Ref})
	}()
	fmt.Printf("pty screen: a program redraws a whole %dx%d screen (%d bytes) every %s, on an agentd PTY and in a tmux pane; %d rounds, each `agentd pty`, `agentd pty --watch` and `tmux attach` in a %dx%d PTY, timed from exec until the screen shows every row, and `agentd version`\n",
		attachCols, attachRows, r.frameBytes, busyFrameInterval, b.cfg.attachRuns, attachCols, attachRows)

	env := append(b.agentdEnv(home, runDir), "TERM=xterm-256color", "COLUMNS=", "LINES=")
	const what = "the busy program's whole screen"
	attach := func(extra ...string) (time.Duration, string, error) {
		args := append([]string{"pty", s.SessionID, res.Ref}, extra...)
		return timeScreenUntil(ctx, command(ctx, env, b.agentd, args...), "\x1c", busyScreenDone, what)
	}
	tm, err := startTmuxPane(ctx, dir, "busy", busy)
	if err != nil {
		r.tmuxErr = err.Error()
		fmt.Printf("  tmux anchor: %v\n", err)
	} else {
		defer tm.stop()
	}
	tmuxAttach := func() (time.Duration, string, error) {
		return timeScreenUntil(ctx, command(ctx, tm.env, "tmux", "-S", tm.sock, "attach-session", "-t", "busy"), "\x02d", busyScreenDone, what)
	}

	// Warm-ups, untimed: the binaries are in the page cache, the worker
	// has sent a screen once, and both programs are drawing.
	if _, screen, err := attach(); err != nil {
		r.err = err.Error()
		fmt.Printf("  agentd pty: %v\n%s\n", err, indent(screen))
	}
	if r.tmuxErr == "" {
		if _, screen, err := tmuxAttach(); err != nil {
			r.tmuxErr = err.Error()
			fmt.Printf("  tmux attach: %v\n%s\n", err, indent(screen))
		}
	}

	var ag, wa, tx, agFirst, txFirst, bf []time.Duration
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
				d, screen, err := attach()
				if err != nil {
					r.err = err.Error()
					fmt.Printf("  round %d: agentd pty: %v\n%s\n", round+1, err, indent(screen))
					return
				}
				ag = append(ag, d)
				agFirst = append(agFirst, lastFirstText)
			},
			func() {
				if r.err != "" {
					return
				}
				d, screen, err := attach("--watch")
				if err != nil {
					r.err = err.Error()
					fmt.Printf("  round %d: agentd pty --watch: %v\n%s\n", round+1, err, indent(screen))
					return
				}
				wa = append(wa, d)
			},
			func() {
				if r.tmuxErr != "" {
					return
				}
				d, screen, err := tmuxAttach()
				if err != nil {
					r.tmuxErr = err.Error()
					fmt.Printf("  round %d: tmux attach: %v\n%s\n", round+1, err, indent(screen))
					return
				}
				tx = append(tx, d)
				txFirst = append(txFirst, lastFirstText)
			},
			func() { r.starts.time(ctx, b, env) },
		}
		if before != "" {
			sides = append(sides, func() {
				cmd := command(ctx, env, before, "pty", s.SessionID, res.Ref)
				d, screen, err := timeScreenUntil(ctx, cmd, "\x1c", busyScreenDone, what)
				if err != nil {
					fmt.Printf("  round %d: the -before pty: %v\n%s\n", round+1, err, indent(screen))
					return
				}
				bf = append(bf, d)
			})
		}
		for i := range sides {
			sides[(i+round)%len(sides)]()
		}
	}
	r.agentd, r.watch, r.tmux = summarize(ag), summarize(wa), summarize(tx)
	r.agentdFirst, r.tmuxFirst = summarize(agFirst), summarize(txFirst)
	if before != "" {
		s := summarize(bf)
		fmt.Printf("  the -before build's pty p50 %s p90 %s (n=%d); this build's p50 %s: %.3f× the earlier\n",
			dur(s.p50), dur(s.p90), s.n, dur(r.agentd.p50), float64(r.agentd.p50)/float64(max(s.p50, 1)))
	}
	fmt.Printf("  agentd pty p50 %s p90 %s max %s (n=%d); --watch p50 %s; tmux attach p50 %s p90 %s max %s (n=%d)\n",
		dur(r.agentd.p50), dur(r.agentd.p90), dur(r.agentd.max), r.agentd.n, dur(r.watch.p50), dur(r.tmux.p50), dur(r.tmux.p90), dur(r.tmux.max), r.tmux.n)
	return nil
}

// echoPart types keys one at a time into `agentd shell` and into `tmux
// attach` to a pane running the same shell, each client in a PTY of this
// process read through a terminal emulator, and times each key from its
// write to the client's terminal until the client has drawn its echo on
// the prompt's line. The two clients stay attached throughout; keys go to
// them in blocks, the sides alternating; every echoLine keys the line is
// erased (ctrl+u, untimed).
func (b *bench) echoPart(ctx context.Context, c *client.Conn, home, runDir, dir string) error {
	r := &b.res.pty.echo
	const shell = "/bin/sh"
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{
		Cwd: b.work, Title: "echo", Model: "faux/echo", Approval: protocol.ApprovalAll,
	})
	if err != nil {
		return err
	}
	fmt.Printf("echo: %d keys typed one at a time, each awaiting its echo, into `agentd shell` and into `tmux attach` (both running %s, in %dx%d PTYs), in blocks of %d, the sides alternating\n",
		b.cfg.echoKeys, shell, attachCols, attachRows, echoBlock)
	env := append(b.agentdEnv(home, runDir), "TERM=xterm-256color", "COLUMNS=", "LINES=", "SHELL="+shell)
	ag, err := startTermClient(command(ctx, env, b.agentd, "shell", s.SessionID))
	if err != nil {
		return err
	}
	defer ag.close("\x1c")
	if err := ag.prompt(ctx); err != nil {
		r.err = err.Error()
		fmt.Printf("  agentd shell: %v\n%s\n", err, indent(ag.screen()))
	}

	var tc *termClient
	tm, err := startTmuxPane(ctx, dir, "echo", "exec "+shell)
	if err == nil {
		defer tm.stop()
		tc, err = startTermClient(command(ctx, tm.env, "tmux", "-S", tm.sock, "attach-session", "-t", "echo"))
	}
	if err == nil {
		defer tc.close("\x02d")
		if err = tc.prompt(ctx); err != nil {
			err = fmt.Errorf("%w\n%s", err, indent(tc.screen()))
		}
	}
	if err != nil {
		r.tmuxErr = err.Error()
		fmt.Printf("  tmux anchor: %v\n", err)
	}

	var agd, txd []time.Duration
	for blk := range max(b.cfg.echoKeys/echoBlock, 1) {
		sides := []func(){
			func() {
				if r.err != "" {
					return
				}
				d, err := ag.echo(ctx, echoBlock)
				if err != nil {
					r.err = err.Error()
					fmt.Printf("  block %d: agentd shell: %v\n%s\n", blk+1, err, indent(ag.screen()))
					return
				}
				agd = append(agd, d...)
				r.agentdBlock = append(r.agentdBlock, summarize(d).p99)
			},
			func() {
				if r.tmuxErr != "" {
					return
				}
				d, err := tc.echo(ctx, echoBlock)
				if err != nil {
					r.tmuxErr = err.Error()
					fmt.Printf("  block %d: tmux attach: %v\n%s\n", blk+1, err, indent(tc.screen()))
					return
				}
				txd = append(txd, d...)
				r.tmuxBlock = append(r.tmuxBlock, summarize(d).p99)
			},
		}
		if blk%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, f := range sides {
			f()
		}
	}
	r.agentd, r.tmux = summarize(agd), summarize(txd)
	r.agentdSlow, r.tmuxSlow = over(agd, echoSlow), over(txd, echoSlow)
	fmt.Printf("  agentd shell p50 %s p99 %s max %s (n=%d); tmux attach p50 %s p99 %s max %s (n=%d)\n",
		dur(r.agentd.p50), dur(r.agentd.p99), dur(r.agentd.max), r.agentd.n, dur(r.tmux.p50), dur(r.tmux.p99), dur(r.tmux.max), r.tmux.n)
	fmt.Printf("  p99 of each block of %d: agentd %s; tmux %s\n", echoBlock, durs(r.agentdBlock), durs(r.tmuxBlock))
	fmt.Printf("  echoes over %s: agentd %d of %d, tmux %d of %d\n", dur(echoSlow), r.agentdSlow, len(agd), r.tmuxSlow, len(txd))
	return nil
}

// shQuote quotes s as one word of sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func durs(d []time.Duration) string {
	s := make([]string, len(d))
	for i, x := range d {
		s[i] = dur(x)
	}
	return strings.Join(s, " ")
}

// startTmuxPane starts a tmux server of its own (no configuration file, no
// status line) with a session name of one 120x40 window whose pane runs
// command.
func startTmuxPane(ctx context.Context, dir, name, cmd string) (*tmuxSide, error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return nil, errors.New("tmux not installed")
	}
	t := &tmuxSide{sock: filepath.Join(dir, "tmux-"+name+".sock")}
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "TERM=") {
			t.env = append(t.env, kv)
		}
	}
	t.env = append(t.env, "TERM=xterm-256color")
	out, err := command(ctx, t.env, "tmux", "-S", t.sock, "-f", "/dev/null",
		"set-option", "-g", "status", "off", ";",
		"new-session", "-d", "-s", name, "-x", fmt.Sprint(attachCols), "-y", fmt.Sprint(attachRows), cmd).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tmux new-session: %v: %s", err, out)
	}
	tmuxServers.Store(t, true)
	if pid, err := command(ctx, t.env, "tmux", "-S", t.sock, "display-message", "-p", "#{pid}").Output(); err == nil {
		fmt.Sscan(string(pid), &t.pid)
	}
	return t, nil
}

// termClient is a program running in a PTY of this process, its output
// drawn by a terminal emulator, that keys are typed into.
type termClient struct {
	cmd     *exec.Cmd // constant
	tty     *os.File  // constant
	exited  chan struct{}
	waitErr error // set before exited closes
	wg      sync.WaitGroup

	mu   sync.Mutex
	term *vt.Emulator            // guarded by mu
	want func(*vt.Emulator) bool // guarded by mu: awaited, or nil
	hit  chan time.Time          // guarded by mu: when want first held

	line string // typed on the prompt's line; used by one goroutine
	keys int    // keys typed so far
}

func startTermClient(cmd *exec.Cmd) (*termClient, error) {
	t := &termClient{cmd: cmd, exited: make(chan struct{}), term: vt.NewEmulator(attachCols, attachRows)}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: attachCols, Rows: attachRows})
	if err != nil {
		return nil, err
	}
	t.tty = tty
	go func() {
		t.waitErr = cmd.Wait()
		close(t.exited)
	}()
	t.wg.Go(func() { // the program's output, onto the screen
		buf := make([]byte, 64<<10)
		for {
			n, err := tty.Read(buf)
			at := time.Now()
			if n > 0 {
				t.mu.Lock()
				t.term.Write(buf[:n])
				if t.want != nil && t.want(t.term) {
					t.hit <- at
					t.want = nil
				}
				t.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	})
	t.wg.Go(func() { // the terminal's answers to the program's queries
		buf := make([]byte, 4<<10)
		for {
			n, err := t.term.Read(buf)
			if err != nil {
				return
			}
			tty.Write(buf[:n])
		}
	})
	return t, nil
}

// await returns a channel that receives when the screen first satisfies
// want: at once when it does already, else at the read of the output that
// made it so.
func (t *termClient) await(want func(*vt.Emulator) bool) <-chan time.Time {
	hit := make(chan time.Time, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if want(t.term) {
		hit <- time.Now()
		return hit
	}
	t.want, t.hit = want, hit
	return hit
}

// wait waits for hit, at most timeout; what names the screen awaited.
func (t *termClient) wait(ctx context.Context, hit <-chan time.Time, timeout time.Duration, what string) (time.Time, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case at := <-hit:
		return at, nil
	case <-t.exited:
		return time.Time{}, fmt.Errorf("%s exited (%v) before its screen showed %s", filepath.Base(t.cmd.Path), t.waitErr, what)
	case <-timer.C:
		t.mu.Lock()
		t.want = nil
		t.mu.Unlock()
		return time.Time{}, fmt.Errorf("%s did not show %s within %s", filepath.Base(t.cmd.Path), what, timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// prompt waits for the shell's first prompt, then sets the prompt to
// echoPrompt and waits for it.
func (t *termClient) prompt(ctx context.Context) error {
	shown := t.await(func(e *vt.Emulator) bool { return strings.TrimSpace(e.String()) != "" })
	if _, err := t.wait(ctx, shown, 20*time.Second, "a prompt"); err != nil {
		return err
	}
	hit := t.await(onPromptLine(echoPrompt))
	if _, err := t.tty.WriteString("PS1='" + echoPrompt + "'\r"); err != nil {
		return err
	}
	_, err := t.wait(ctx, hit, 20*time.Second, fmt.Sprintf("the prompt %q", echoPrompt))
	return err
}

// onPromptLine reports whether the cursor's line reads line, with the
// cursor right after it.
func onPromptLine(line string) func(*vt.Emulator) bool {
	return func(e *vt.Emulator) bool {
		pos := e.CursorPosition()
		if pos.X != len(line) {
			return false
		}
		var b strings.Builder
		for x := range e.Width() {
			c := e.CellAt(x, pos.Y)
			if c == nil || c.Content == "" {
				b.WriteByte(' ')
			} else {
				b.WriteString(c.Content)
			}
		}
		return strings.TrimRight(b.String(), " ") == strings.TrimRight(line, " ")
	}
}

// echoKeys are the keys typed, in turn.
const echoKeys = "abcdefghijklmnopqrstuvwxyz0123456789"

// echo types n keys, one at a time, and returns how long each took to
// show on the prompt's line.
func (t *termClient) echo(ctx context.Context, n int) ([]time.Duration, error) {
	d := make([]time.Duration, 0, n)
	for range n {
		if len(t.line) >= echoLine {
			hit := t.await(onPromptLine(echoPrompt))
			if _, err := t.tty.Write([]byte{0x15}); err != nil { // ctrl+u
				return d, err
			}
			if _, err := t.wait(ctx, hit, 20*time.Second, "the prompt's line erased"); err != nil {
				return d, err
			}
			t.line = ""
		}
		k := echoKeys[t.keys%len(echoKeys)]
		t.keys++
		t.line += string(k)
		hit := t.await(onPromptLine(echoPrompt + t.line))
		t0 := time.Now()
		if _, err := t.tty.Write([]byte{k}); err != nil {
			return d, err
		}
		at, err := t.wait(ctx, hit, 20*time.Second, fmt.Sprintf("the echo of key %d (%q)", t.keys, k))
		if err != nil {
			return d, err
		}
		d = append(d, at.Sub(t0))
	}
	return d, nil
}

// screen is the client's screen as text.
func (t *termClient) screen() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.term.String()
}

// close types detach, waits a moment for the program to exit, kills it if
// it has not, and stops reading it.
func (t *termClient) close(detach string) {
	t.tty.WriteString(detach)
	select {
	case <-t.exited:
	case <-time.After(3 * time.Second):
		t.cmd.Process.Kill()
		<-t.exited
	}
	t.tty.Close()
	t.mu.Lock()
	t.term.Close() // ends the answers' pump
	t.mu.Unlock()
	t.wg.Wait()
}

func (r ptyScreenResults) rows() []row {
	if r.agentd.n == 0 && r.tmux.n == 0 && r.err == "" {
		return nil // not run
	}
	nan := math.NaN()
	label := fmt.Sprintf("`agentd pty` to the first whole screen of a busy PTY, p50 (n=%d)", r.agentd.n)
	switch {
	case r.err != "" && r.agentd.n == 0:
		return []row{{"`agentd pty` to the first whole screen of a busy PTY", "failed: " + r.err, dur(r.tmux.p50) + " tmux attach", nan, "≤ 1.5×", "FAIL"}}
	case r.tmux.n == 0:
		return []row{{label, dur(r.agentd.p50), "tmux unavailable: " + r.tmuxErr, nan, "≤ 1.5×", "n/a (no anchor)"}}
	}
	q := table.Ratio(r.agentd.p50, r.tmux.p50)
	rows := []row{
		{label, dur(r.agentd.p50), dur(r.tmux.p50) + " tmux attach", q, "≤ 1.5×", table.Verdict(r.err == "" && q <= goalPTYScreen)},
		{"  p90", dur(r.agentd.p90), dur(r.tmux.p90) + " tmux attach", table.Ratio(r.agentd.p90, r.tmux.p90), "-", "info"},
		{"  `agentd pty --watch` (takes no control), p50", dur(r.watch.p50), dur(r.tmux.p50) + " tmux attach", table.Ratio(r.watch.p50, r.tmux.p50), "-", "info"},
		{"  exec → the screen first shows any text, p50", dur(r.agentdFirst.p50), dur(r.tmuxFirst.p50) + " tmux attach", table.Ratio(r.agentdFirst.p50, r.tmuxFirst.p50), "-", "info"},
	}
	return append(rows, r.starts.rows(r.tmux)...)
}

func (r echoResults) rows() []row {
	if r.agentd.n == 0 && r.tmux.n == 0 && r.err == "" {
		return nil // not run
	}
	nan := math.NaN()
	label := fmt.Sprintf("keystroke echo through `agentd shell`, p99 (n=%d)", r.agentd.n)
	switch {
	case r.err != "" && r.agentd.n == 0:
		return []row{{"keystroke echo through `agentd shell`", "failed: " + r.err, dur(r.tmux.p99) + " tmux attach", nan, "≤ 2×", "FAIL"}}
	case r.tmux.n == 0:
		return []row{{label, dur(r.agentd.p99), "tmux unavailable: " + r.tmuxErr, nan, "≤ 2×", "n/a (no anchor)"}}
	}
	q := table.Ratio(r.agentd.p99, r.tmux.p99)
	slow := nan
	if r.tmuxSlow > 0 {
		slow = float64(r.agentdSlow) / float64(r.tmuxSlow)
	}
	return []row{
		{label, dur(r.agentd.p99), dur(r.tmux.p99) + " tmux attach", q, "≤ 2×", table.Verdict(r.err == "" && q <= goalEchoP99)},
		{"  p50", dur(r.agentd.p50), dur(r.tmux.p50) + " tmux attach", table.Ratio(r.agentd.p50, r.tmux.p50), "-", "info"},
		{fmt.Sprintf("  median of the blocks' p99 (%d keys a block)", echoBlock), dur(medianDur(r.agentdBlock)), dur(medianDur(r.tmuxBlock)) + " tmux attach", table.Ratio(medianDur(r.agentdBlock), medianDur(r.tmuxBlock)), "-", "info"},
		{"  max", dur(r.agentd.max), dur(r.tmux.max) + " tmux attach", table.Ratio(r.agentd.max, r.tmux.max), "-", "info"},
		{fmt.Sprintf("  echoes over %s (a stall a person notices)", dur(echoSlow)), strconv.Itoa(r.agentdSlow), strconv.Itoa(r.tmuxSlow) + " tmux attach", slow, "-", "info"},
	}
}
