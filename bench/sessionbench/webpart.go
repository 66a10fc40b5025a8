package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/coder/websocket"

	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// The web part: the same streamed turn and the same PTY relay, to a
// client over the host's WebSocket and to one over its unix socket, in
// one run, the two sides alternating which goes first each round.

// goalWebVsUnix is the least share of the unix socket's rate the
// WebSocket must reach, for the text-delta stream and the PTY relay.
const goalWebVsUnix = 0.70

// webResults are the figures of the web part.
type webResults struct {
	deltas               int
	bytes                int64
	unixStream, wsStream []float64 // deltas/s reaching the client, per round
	unixRelay, wsRelay   []float64 // PTY output bytes/s reaching the client, per round
	err                  string
}

func (b *bench) webPart(ctx context.Context) error {
	r := &b.res.web
	r.deltas = b.cfg.deltas
	size := int64(64 << 20)
	if b.cfg.quick {
		size = 16 << 20
	}
	dir := filepath.Join(b.base, "w")
	home, runDir, err := newPlace(dir)
	if err != nil {
		return err
	}
	script, err := b.throughputScript()
	if err != nil {
		return err
	}
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, script, 0o644); err != nil {
		return err
	}
	file := filepath.Join(dir, "relay.txt")
	if r.bytes, err = writeRelayFile(file, size); err != nil {
		return err
	}
	c, _, err := b.openHost(ctx, home, runDir, "AGENTD_FAUX_SCRIPT="+scriptPath, "AGENTD_WORKER_IDLE_GRACE=10m")
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()
	ws, err := dialWebOwner(ctx, c)
	if err != nil {
		return fmt.Errorf("the web listener: %w", err)
	}
	defer ws.Close()
	fmt.Printf("web: %d rounds; in each, over the unix socket and over the WebSocket (the owner's login), the two alternating which goes first: a fresh session streams %d one-byte text deltas in one turn to its subscriber; a fresh session's PTY `cat`s a %d MiB file to its subscriber\n",
		b.cfg.rounds, b.cfg.deltas, size>>20)
	sides := []struct {
		name          string
		c             *client.Conn
		stream, relay *[]float64
	}{
		{"unix", c, &r.unixStream, &r.unixRelay},
		{"websocket", ws, &r.wsStream, &r.wsRelay},
	}
	for round := range b.cfg.rounds {
		line := fmt.Sprintf("  round %d:", round+1)
		for i := range sides {
			side := sides[(i+round)%2]
			sub, err := subscribe(ctx, side.c, home, b.work, fmt.Sprintf("web %s %d", side.name, round))
			if err != nil {
				return err
			}
			if _, err := sub.turn(ctx, "warm up"); err != nil {
				return fmt.Errorf("%s: warm-up turn: %w", side.name, err)
			}
			tr, err := sub.turn(ctx, "stream")
			sub.close(ctx)
			if err != nil {
				r.err = fmt.Sprintf("%s: the streamed turn: %v", side.name, err)
				return errors.New(r.err)
			}
			rate := float64(tr.text) / tr.last.Sub(tr.start).Seconds()
			*side.stream = append(*side.stream, rate)

			if sub, err = subscribe(ctx, side.c, home, b.work, fmt.Sprintf("web pty %s %d", side.name, round)); err != nil {
				return err
			}
			relay, _, err := relayRate(ctx, sub, file, r.bytes)
			sub.close(ctx)
			if err != nil {
				r.err = fmt.Sprintf("%s: the PTY relay: %v", side.name, err)
				return errors.New(r.err)
			}
			*side.relay = append(*side.relay, relay)
			line += fmt.Sprintf(" %s %.0f deltas/s, %.1f MB/s relayed;", side.name, rate, relay/1e6)
		}
		fmt.Println(line)
	}
	return nil
}

// dialWebOwner starts the host's web listener, exchanges the owner's
// login token for its cookie, and connects a client over the WebSocket
// with it.
func dialWebOwner(ctx context.Context, c *client.Conn) (*client.Conn, error) {
	l, err := client.Call(ctx, c, protocol.OpHostWebStart, protocol.WebStartInput{})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+"login", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.OwnerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 {
		return nil, fmt.Errorf("the login answered %s", resp.Status)
	}
	cookie := resp.Cookies()[0].String()
	return client.Dial(ctx, l.WebSocketURL, client.Options{Dial: func(ctx context.Context) (net.Conn, error) {
		ws, _, err := websocket.Dial(ctx, l.WebSocketURL, &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {cookie}}})
		if err != nil {
			return nil, err
		}
		return websocket.NetConn(context.Background(), ws, websocket.MessageText), nil
	}})
}

func (r *webResults) rows() []row {
	if r.err != "" {
		return []row{{"over the WebSocket", "failed: " + r.err, "-", math.NaN(), "≥ 0.70×", "FAIL"}}
	}
	if len(r.unixStream) == 0 {
		return nil
	}
	us, ws := median(r.unixStream), median(r.wsStream)
	ur, wr := median(r.unixRelay), median(r.wsRelay)
	return []row{
		{fmt.Sprintf("text deltas/s over the WebSocket (%dk in one turn), median of %d", r.deltas/1000, len(r.wsStream)), fmt.Sprintf("%.0f/s", ws), fmt.Sprintf("%.0f/s unix socket", us), ws / us, "≥ 0.70×", table.Verdict(ws/us >= goalWebVsUnix)},
		{fmt.Sprintf("PTY relay over the WebSocket (`cat` of %d MiB), median of %d", r.bytes>>20, len(r.wsRelay)), fmt.Sprintf("%.1f MB/s", wr/1e6), fmt.Sprintf("%.1f MB/s unix socket", ur/1e6), wr / ur, "≥ 0.70×", table.Verdict(wr/ur >= goalWebVsUnix)},
	}
}
