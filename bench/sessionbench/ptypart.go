package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/resource"
	"github.com/agentd-dev/agentd/protocol"

	"github.com/agentd-dev/agentd/bench/internal/table"
)

// The pty part: a PTY's output relayed by agentd (worker → host → one
// subscribed client) against the same output read straight from a PTY in
// this process; what ten idle PTYs cost their worker in memory; and, in
// ptyterm.go, `agentd pty` attaching to a busy PTY and keys echoed
// through `agentd shell`, each against tmux.

const (
	goalPTYVsTmux = 1.5     // agentd's relay ≥ 1.5× tmux relaying to an attached client
	goalPTYVsRaw  = 0.70    // agentd's relay ≥ 70% of reading the PTY directly
	goalIdlePTYs  = 4 << 20 // ten idle PTYs: worker RSS growth
	idlePTYs      = 10
	ptyRelayLines = 80 // bytes a line of the relayed file
)

type ptyResults struct {
	bytes        int64
	rawRate      []float64 // bytes/s read straight from a PTY
	tmuxRate     []float64 // bytes/s through tmux to an attached client
	tmuxErr      string
	delivered    []float64 // the share of the output the client got as output
	agentdRate   []float64 // bytes/s reaching the subscribed client
	rssBefore    int64
	rssAfter     int64
	relayErr     string
	workerCPU    time.Duration
	hostCPU      time.Duration
	clientCPU    time.Duration // this process's, reading the relay
	workerFaults uint64        // minor page faults of the worker during the relays
	hostFaults   uint64
	framesPerMiB float64
	screen       ptyScreenResults // `agentd pty` to a busy PTY's first screen
	echo         echoResults      // keystroke echo through `agentd shell`
}

func (b *bench) ptyPart(ctx context.Context) error {
	r := &b.res.pty
	size := int64(64 << 20)
	if b.cfg.quick {
		size = 16 << 20
	}
	dir := filepath.Join(b.base, "p")
	home, runDir, err := newPlace(dir)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "relay.txt")
	if r.bytes, err = writeRelayFile(file, size); err != nil {
		return err
	}
	c, info, err := b.openHost(ctx, home, runDir, "AGENTD_WORKER_IDLE_GRACE=10m")
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()
	fmt.Printf("pty: %d rounds of `cat` of a %d MiB text file on a PTY: read straight from the PTY in this process (the anchor), and relayed by agentd to one client that chose the PTY; then %d idle PTYs in one session\n",
		b.cfg.rounds, size>>20, idlePTYs)
	run := func(piece string) bool { return slices.Contains(strings.Split(b.cfg.ptyParts, ","), piece) }
	for round := range b.cfg.rounds {
		if !run("relay") {
			break
		}
		raw, err := rawPTYRate(ctx, file)
		if err != nil {
			return fmt.Errorf("raw PTY: %w", err)
		}
		r.rawRate = append(r.rawRate, raw)
		if tm, err := tmuxRelayRate(ctx, dir, file, r.bytes); err != nil {
			r.tmuxErr = err.Error()
		} else {
			r.tmuxRate = append(r.tmuxRate, tm)
			fmt.Printf("  round %d: tmux %.1f MB/s to an attached client\n", round+1, tm/1e6)
		}
		sub, err := subscribe(ctx, c, home, b.work, fmt.Sprintf("pty %d", round))
		if err != nil {
			return err
		}
		pid := workerPID(home, sub.session)
		w0, h0, c0 := procCPU(pid), procCPU(info.PID), selfCPU()
		wf0, hf0 := procFaults(pid), procFaults(info.PID)
		rate, frames, werr := relayRate(ctx, sub, file, r.bytes)
		if werr != nil {
			r.relayErr = werr.Error()
			sub.close(ctx)
			fmt.Printf("  round %d: raw %.1f MB/s; agentd FAILED: %v\n", round+1, raw/1e6, werr)
			continue
		}
		r.workerCPU += procCPU(pid) - w0
		r.hostCPU += procCPU(info.PID) - h0
		r.clientCPU += selfCPU() - c0
		r.workerFaults += procFaults(pid) - wf0
		r.hostFaults += procFaults(info.PID) - hf0
		r.framesPerMiB = float64(frames) / float64(r.bytes>>20)
		r.agentdRate = append(r.agentdRate, rate)
		r.delivered = append(r.delivered, delivered)
		fmt.Printf("  round %d: raw %.1f MB/s, agentd %.1f MB/s (%.2f×), %d frames; %.0f%% of the output reached the client as output, the rest as screens\n", round+1, raw/1e6, rate/1e6, rate/raw, frames, 100*delivered)
		sub.close(ctx)
	}

	if run("idle") {
		if err := b.idlePTYs(ctx, c, home); err != nil {
			return err
		}
	}
	if run("screen") {
		if err := b.ptyScreenPart(ctx, c, home, runDir, dir); err != nil {
			return fmt.Errorf("screen: %w", err)
		}
	}
	if run("echo") {
		if err := b.echoPart(ctx, c, home, runDir, dir); err != nil {
			return fmt.Errorf("echo: %w", err)
		}
	}
	return nil
}

// idlePTYs measures what ten idle PTYs in one session cost its worker.
func (b *bench) idlePTYs(ctx context.Context, c *client.Conn, home string) error {
	r := &b.res.pty
	sub, err := subscribe(ctx, c, home, b.work, "idle ptys")
	if err != nil {
		return err
	}
	defer sub.close(ctx)
	if err := startResource(ctx, c, sub.session, "warm", "true", false); err != nil {
		return err
	}
	pid := workerPID(home, sub.session)
	time.Sleep(b.cfg.settle)
	r.rssBefore = rssBytes(pid)
	// Each prints a screenful and a prompt, as a shell that ran a command
	// does, then waits; the worker drops an idle PTY's screen model after
	// resource.DefaultScreenSleep, and gives the memory back to the system
	// a second after a screen fell asleep, so the count is taken after
	// both and a settle. (Taken a settle after the first alone, the count
	// raced the giving back: it read 15 or 26 MiB, the same executable.)
	for i := range idlePTYs {
		if err := startResource(ctx, c, sub.session, fmt.Sprint("idle-", i), "seq 1 100; printf 'idle $ '; exec sleep 3600", true); err != nil {
			return err
		}
	}
	time.Sleep(resource.DefaultScreenSleep + time.Second + b.cfg.settle)
	r.rssAfter = rssBytes(pid)
	fmt.Printf("  worker RSS %s with no PTY, %s with %d idle PTYs\n", mib(r.rssBefore), mib(r.rssAfter), idlePTYs)
	return nil
}

// writeRelayFile writes size bytes of numbered text lines.
func writeRelayFile(path string, size int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	for i := 0; n < size; i++ {
		line := fmt.Sprintf("%08d %s\n", i, strings.Repeat("abcdefghij", (ptyRelayLines-10)/10))
		w.WriteString(line)
		n += int64(len(line))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return n, f.Close()
}

// rawPTYRate runs `cat file` on a PTY and reads it to its end.
func rawPTYRate(ctx context.Context, file string) (float64, error) {
	cmd := exec.CommandContext(ctx, "cat", file)
	start := time.Now()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		return 0, err
	}
	n, _ := io.Copy(io.Discard, f) // ends with EIO once cat exits
	elapsed := time.Since(start)
	f.Close()
	cmd.Wait()
	return float64(n) / elapsed.Seconds(), nil
}

func startResource(ctx context.Context, c *client.Conn, session, launch, command string, onPTY bool) error {
	_, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: session, LaunchID: launch, Command: command, PTY: onPTY, Cols: 120, Rows: 40,
	})
	return err
}

// delivered is the share of the last relayed output that reached the
// client as output, the rest having been skipped to the screen.
var delivered float64

// relayRate starts a PTY that waits for a line and then cats file, chooses
// it on the subscription, sends the line and reads the output until the
// PTY exits; it returns the bytes/s of output that reached the client, and
// the frames that carried it.
func relayRate(ctx context.Context, sub *subscription, file string, want int64) (rate float64, frames int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res, err := client.Call(ctx, sub.c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: sub.session, LaunchID: "relay", Command: "stty -echo; read go; exec cat " + file, PTY: true, Cols: 120, Rows: 40,
	})
	if err != nil {
		return 0, 0, err
	}
	if _, err := client.Call(ctx, sub.c, protocol.OpSubscriptionPtyInterestSet, protocol.PtyInterestInput{SubscriptionID: sub.id, Refs: []string{res.Ref}}); err != nil {
		return 0, 0, err
	}
	ctl, err := client.Call(ctx, sub.c, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: sub.session, Ref: res.Ref})
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := client.Call(ctx, sub.c, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
		SessionID: sub.session, Ref: res.Ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "\n",
	}); err != nil {
		return 0, 0, err
	}
	var got int64
	var data []byte
	for {
		f, err := sub.w.Next(ctx)
		if err != nil {
			return 0, frames, fmt.Errorf("after %d of %d bytes: %w", got, want, err)
		}
		switch f.Kind {
		case protocol.KindRuntimeResourcePtyData:
			// As client.PTYStream reads it.
			d, err := protocol.DecodePtyDataFields(f.Raw)
			if err != nil {
				return 0, frames, err
			}
			data = d.AppendData(data[:0])
			if !d.Screen {
				got += int64(len(data))
				frames++
			}
		case protocol.KindRuntimeResourceUpdate:
			var u protocol.RuntimeResourceUpdateFrame
			var rs protocol.Resource
			if f.Decode(&u) == nil && json.Unmarshal(u.Resource, &rs) == nil && rs.Ref == res.Ref && rs.State == protocol.ResourceExited {
				elapsed := time.Since(start)
				// A client that lags is skipped to the PTY's screen:
				// what it was sent is counted apart.
				delivered = float64(got) / float64(want)
				return float64(want) / elapsed.Seconds(), frames, nil
			}
		case protocol.KindSubscriptionClosed:
			return 0, frames, errors.New("the subscription closed: " + string(f.Raw))
		}
	}
}

func (r ptyResults) rows() []row {
	rawRate, agentdRate := medianOr(r.rawRate), medianOr(r.agentdRate)
	q := agentdRate / rawRate
	verdict := table.Verdict(r.relayErr == "" && q >= goalPTYVsRaw)
	agent := fmt.Sprintf("%.1f MB/s", agentdRate/1e6)
	if r.relayErr != "" {
		agent = "failed: " + r.relayErr
	}
	growth := r.rssAfter - r.rssBefore
	tmuxRate := medianOr(r.tmuxRate)
	tmuxAnchor, tmuxVerdict := fmt.Sprintf("%.1f MB/s tmux attached", tmuxRate/1e6), table.Verdict(r.relayErr == "" && agentdRate/tmuxRate >= goalPTYVsTmux)
	if r.tmuxErr != "" {
		tmuxAnchor, tmuxVerdict = "tmux failed: "+r.tmuxErr, "n/a (no anchor)"
	}
	var rows []row
	if len(r.rawRate) > 0 || r.relayErr != "" {
		rows = append(rows,
			row{"PTY relay, against tmux relaying the same `cat` to an attached client", agent, tmuxAnchor, agentdRate / tmuxRate, "≥ 1.5×", tmuxVerdict},
			row{fmt.Sprintf("PTY relay: `cat` of %d MiB, one client attached, to its end; median of %d", r.bytes>>20, len(r.rawRate)), agent, fmt.Sprintf("%.1f MB/s raw PTY", rawRate/1e6), q, "≥ 0.70×", verdict},
			row{"  frames a MiB of output", fmt.Sprintf("%.1f", r.framesPerMiB), "-", math.NaN(), "-", "info"},
			row{"  output that reached the client as output (the rest: screens)", fmt.Sprintf("%.0f%%", 100*medianOr(r.delivered)), "-", math.NaN(), "-", "info"},
			row{"  page faults a MiB relayed: worker / host", fmt.Sprintf("%.0f / %.0f", perMiBCount(r.workerFaults, r.bytes, len(r.agentdRate)), perMiBCount(r.hostFaults, r.bytes, len(r.agentdRate))), "-", math.NaN(), "-", "info"},
			row{"  CPU a MiB relayed: worker / host / this client", fmt.Sprintf("%.1fms / %.1fms / %.1fms", perMiB(r.workerCPU, r.bytes, len(r.agentdRate)), perMiB(r.hostCPU, r.bytes, len(r.agentdRate)), perMiB(r.clientCPU, r.bytes, len(r.agentdRate))), "-", math.NaN(), "-", "info"},
		)
	}
	if r.rssAfter > 0 {
		rows = append(rows, row{fmt.Sprintf("worker RSS growth, %d idle PTYs", idlePTYs), mib(growth), mib(r.rssBefore) + " without", math.NaN(), "≤ 4 MiB", table.Verdict(growth <= goalIdlePTYs)})
	}
	rows = append(rows, r.screen.rows()...)
	return append(rows, r.echo.rows()...)
}

// perMiB is d, spent over rounds relays of size bytes, in milliseconds a
// MiB.
func perMiB(d time.Duration, size int64, rounds int) float64 {
	if rounds == 0 {
		return math.NaN()
	}
	return float64(d.Milliseconds()) / float64(rounds) / float64(size>>20)
}

// perMiBCount is n, counted over rounds relays of size bytes, a MiB.
func perMiBCount(n uint64, size int64, rounds int) float64 {
	if rounds == 0 {
		return math.NaN()
	}
	return float64(n) / float64(rounds) / float64(size>>20)
}

// medianOr is the median of v, or NaN when it is empty.
func medianOr(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return median(v)
}

// tmuxRelayRate runs `cat file` in a tmux pane with a client attached in
// a PTY of this process (its output read and dropped), and times it from
// the key that starts it to its end, which the pane signals with
// `tmux wait-for`.
func tmuxRelayRate(ctx context.Context, dir, file string, size int64) (float64, error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return 0, errors.New("no tmux")
	}
	t := &tmuxSide{sock: filepath.Join(dir, "tmux-relay.sock")}
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "TERM=") {
			t.env = append(t.env, kv)
		}
	}
	t.env = append(t.env, "TERM=xterm-256color")
	tmux := func(args ...string) error {
		out, err := command(ctx, t.env, "tmux", append([]string{"-S", t.sock}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("tmux %s: %v: %s", args[0], err, out)
		}
		return nil
	}
	pane := fmt.Sprintf("stty -echo; read go; cat %s; tmux -S %s wait-for -S relay-done; exec sleep 3600", file, t.sock)
	if err := tmux("-f", "/dev/null", "new-session", "-d", "-s", "relay", "-x", "120", "-y", "40", pane); err != nil {
		return 0, err
	}
	tmuxServers.Store(t, true)
	defer func() {
		t.stop()
		tmuxServers.Delete(t)
	}()
	client := command(ctx, t.env, "tmux", "-S", t.sock, "attach-session", "-t", "relay")
	f, err := pty.StartWithSize(client, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		return 0, err
	}
	defer func() { f.Close(); client.Wait() }()
	go io.Copy(io.Discard, f)
	// Wait for the client to be attached.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, _ := command(ctx, t.env, "tmux", "-S", t.sock, "list-clients").Output()
		if len(strings.TrimSpace(string(out))) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, errors.New("the tmux client never attached")
		}
	}
	start := time.Now()
	if err := tmux("send-keys", "-t", "relay", "Enter"); err != nil {
		return 0, err
	}
	if err := tmux("wait-for", "relay-done"); err != nil {
		return 0, err
	}
	return float64(size) / time.Since(start).Seconds(), nil
}
