// Command acpbench measures `agentd acp`, the Agent Client Protocol agent,
// beside anchors run in the same process on the same sessions:
//
//   - load: `session/load` of a session of about 1,000 transcript records,
//     from starting `agentd acp` to the load's answer (which comes after
//     the last replayed update), beside `agentd log` printing the same
//     session, from its start to its exit. Goal: at most 2×.
//   - rate: the text of one long reply (100,000 deltas by default)
//     through `agentd acp` to an ACP client (acp.NewClientSideConnection),
//     beside the same reply's text through a session stream to a Go
//     protocol client (client.Conn.OpenSession), in bytes of text a
//     second from the prompt to its turn's end. Goal: at least 0.5×.
//
// Everything runs as real processes: this binary runs agentd's command
// line when asked to (the host, the workers, `agentd acp`, `agentd log`),
// in fresh temporary homes, with the offline model playing a script.
//
// Run it from the module root:
//
//	go run ./bench/acpbench
//	go run ./bench/acpbench -records 1000 -deltas 200000 -runs 5
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/bench/internal/harness"
	benchplace "github.com/agentd-dev/agentd/bench/internal/place"
	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

type row table.Row

// place is a home, a runtime directory and a working directory, with the
// environment of every agentd process run in them.
type place struct{ *benchplace.Place }

func newPlace(base, name, script string) (*place, error) {
	p, err := benchplace.New(base, name, script)
	if err != nil {
		return nil, err
	}
	return &place{p}, nil
}

// newSession creates a session of the place that runs every tool call.
func (p *place) newSession(ctx context.Context, c *client.Conn) (string, error) {
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.Work, Approval: protocol.ApprovalAll})
	return s.SessionID, err
}

func main() {
	asagentd.Main()
	records := flag.Int("records", 1000, "load: transcript records of the loaded session, about")
	deltas := flag.Int("deltas", 100000, "rate: text deltas of the streamed reply (5 bytes each; a message past the wire limit ends without its text)")
	runs := flag.Int("runs", 5, "load: runs of each side; the median is reported")
	flag.Parse()
	base, err := os.MkdirTemp("", "acpb")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var places []*place
	var mu sync.Mutex
	keep := func(p *place) {
		mu.Lock()
		places = append(places, p)
		mu.Unlock()
	}
	harness.Run("acpbench", func(ctx context.Context) error {
		var rows []row
		load, err := benchLoad(ctx, base, *records, *runs, keep)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		rows = append(rows, load...)
		rate, err := benchRate(ctx, base, *deltas, keep)
		if err != nil {
			return fmt.Errorf("rate: %w", err)
		}
		rows = append(rows, rate...)
		table.Print(os.Stdout, rows, 2)
		return nil
	}, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range places {
			p.Stop()
		}
		os.RemoveAll(base)
	})
}

// benchLoad times session/load of a session of about records records
// beside agentd log of it.
func benchLoad(ctx context.Context, base string, records, runs int, keep func(*place)) ([]row, error) {
	// A turn of 49 model calls asking for one ls each (an assistant
	// message and a tool result: two records), then an answer, is about
	// 100 records (a turn takes at most 100 model calls).
	turns := max(1, records/100)
	var replies []string
	for i := range turns * 49 {
		replies = append(replies, fmt.Sprintf(`{"steps":[{"text":"step %d"},{"tool":"ls","arguments":{"path":"."}}]}`, i))
		if i%49 == 48 {
			replies = append(replies, `{"steps":[{"text":"done"}]}`)
		}
	}
	p, err := newPlace(base, "load", `{"replies":[`+strings.Join(replies, ",")+`]}`)
	if err != nil {
		return nil, err
	}
	keep(p)
	c, err := p.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id, err := p.newSession(ctx, c)
	if err != nil {
		return nil, err
	}
	for range turns {
		if out, err := p.Command("run", "--session", id, "--json", "go").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("a turn: %w: %s", err, out[max(0, len(out)-500):])
		}
	}
	sess, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
	if err != nil {
		return nil, err
	}
	page, err := c.TranscriptPage(ctx, id, client.PageRequest{Direction: client.PageOlder, MaxBytes: 1024})
	if err != nil {
		return nil, err
	}
	n := uint64(0)
	if len(page.Records) > 0 {
		n = page.Records[len(page.Records)-1].Seq
	}
	// An editor that gives the session its MCP servers: the first load
	// records them, and the later ones, giving the same, change nothing.
	// (The server fails at its start: only the loads are timed.)
	servers := []sdk.McpServer{{Stdio: &sdk.McpServerStdio{Name: "editor", Command: "/bin/true", Args: []string{},
		Env: []sdk.EnvVariable{{Name: "EDITOR_TOKEN", Value: "k"}}}}}
	if _, _, err := loadOnce(ctx, p, id, sess.Cwd, servers); err != nil {
		return nil, err
	}
	var logTimes, loadTimes, sdkTimes, mcpTimes []time.Duration
	var updates int
	for range runs {
		began := time.Now()
		cmd := p.Command("log", id)
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("agentd log: %w", err)
		}
		logTimes = append(logTimes, time.Since(began))
		took, got, err := loadRaw(p, id, sess.Cwd)
		if err != nil {
			return nil, err
		}
		loadTimes, updates = append(loadTimes, took), got
		if took, _, err = loadOnce(ctx, p, id, sess.Cwd, nil); err != nil {
			return nil, err
		}
		sdkTimes = append(sdkTimes, took)
		if took, _, err = loadOnce(ctx, p, id, sess.Cwd, servers); err != nil {
			return nil, err
		}
		mcpTimes = append(mcpTimes, took)
	}
	lg, ld, sd, md := median(logTimes), median(loadTimes), median(sdkTimes), median(mcpTimes)
	ratio := table.Ratio(ld, lg)
	return []row{
		{fmt.Sprintf("session/load of %d records (%d updates)", n, updates), ms(ld), ms(lg) + " agentd log", ratio, "≤ 2.0×", table.Verdict(ratio <= 2)},
		{"  the same, decoded by the Go SDK's client", ms(sd), ms(lg) + " agentd log", table.Ratio(sd, lg), "-", "info"},
		{"  the same, giving the MCP server the session has", ms(md), ms(sd) + " giving none", table.Ratio(md, sd), "-", "info"},
	}, nil
}

// loadRaw starts agentd acp, loads session id as a client that reads
// lines and decodes only their ids, and returns the time from the start
// to the load's answer, which comes after the last replayed update, and
// the updates before it.
func loadRaw(p *place, id, cwd string) (time.Duration, int, error) {
	began := time.Now()
	cmd := p.Command("acp")
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 16<<20)
	await := func(want int) (int, error) {
		n := 0
		for lines.Scan() {
			var m struct {
				ID *int `json:"id"`
			}
			if json.Unmarshal(lines.Bytes(), &m) != nil {
				return n, fmt.Errorf("agentd acp wrote %.200q", lines.Text())
			}
			if m.ID != nil && *m.ID == want {
				return n, nil
			}
			n++
		}
		return n, errors.New("agentd acp ended before answering")
	}
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	if _, err := await(1); err != nil {
		return 0, 0, err
	}
	load, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": map[string]any{"sessionId": id, "cwd": cwd, "mcpServers": []any{}}})
	in.Write(append(load, '\n'))
	n, err := await(2)
	return time.Since(began), n, err
}

// counter is an ACP client that counts what it is sent.
type counter struct {
	sdk.Client
	mu      sync.Mutex
	updates int
	text    int
}

func (c *counter) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates++
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.text += len(m.Content.Text.Text)
	}
	return nil
}

// editor starts agentd acp and connects an ACP client to it.
func editor(ctx context.Context, p *place) (*sdk.ClientSideConnection, *counter, func(), error) {
	cmd := p.Command("acp")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	cl := &counter{}
	conn := sdk.NewClientSideConnection(cl, in, out)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	end := func() {
		in.Close()
		cmd.Wait()
		<-conn.Done()
	}
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		end()
		return nil, nil, nil, err
	}
	return conn, cl, end, nil
}

// loadOnce starts agentd acp, loads session id giving it servers and
// returns the time from the start to the load's answer, and the updates
// replayed.
func loadOnce(ctx context.Context, p *place, id, cwd string, servers []sdk.McpServer) (time.Duration, int, error) {
	began := time.Now()
	conn, cl, end, err := editor(ctx, p)
	if err != nil {
		return 0, 0, err
	}
	defer end()
	if servers == nil {
		servers = []sdk.McpServer{}
	}
	if _, err := conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(id), Cwd: cwd, McpServers: servers}); err != nil {
		return 0, 0, err
	}
	took := time.Since(began)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return took, cl.updates, nil
}

// benchRate streams one long reply to a Go protocol client, then another
// to an ACP client, and compares their rates of text.
func benchRate(ctx context.Context, base string, deltas int, keep func(*place)) ([]row, error) {
	reply := fmt.Sprintf(`{"steps":[{"repeat":%d,"text":"word "}]}`, deltas)
	p, err := newPlace(base, "rate", `{"replies":[`+reply+`,`+reply+`]}`)
	if err != nil {
		return nil, err
	}
	keep(p)
	c, err := p.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id, err := p.newSession(ctx, c)
	if err != nil {
		return nil, err
	}

	// The Go protocol client: a session stream, the turn started on the
	// same connection.
	s, err := c.OpenSession(ctx, id, client.SessionOptions{})
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "go-turn", Content: protocol.Content{Text: "go"}}); err != nil {
		return nil, err
	}
	goText := 0
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return nil, err
		}
		if ev.Delta.Event == protocol.EventMessageUpdate {
			goText += len(ev.Delta.Text)
		}
		if ev.Delta.Event == protocol.EventRunEnd {
			break
		}
	}
	goTook := time.Since(began)
	s.Close()

	// The ACP client.
	conn, cl, end, err := editor(ctx, p)
	if err != nil {
		return nil, err
	}
	defer end()
	if _, err := conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sdk.SessionId(id), Cwd: p.Work}); err != nil {
		return nil, err
	}
	began = time.Now()
	resp, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(id), Prompt: []sdk.ContentBlock{sdk.TextBlock("go")}})
	if err != nil {
		return nil, err
	}
	acpTook := time.Since(began)
	if resp.StopReason != sdk.StopReasonEndTurn {
		return nil, errors.New("the ACP prompt stopped: " + string(resp.StopReason))
	}
	cl.mu.Lock()
	acpText, acpUpdates := cl.text, cl.updates
	cl.mu.Unlock()
	goRate := float64(goText) / goTook.Seconds()
	acpRate := float64(acpText) / acpTook.Seconds()
	ratio := acpRate / goRate
	return []row{
		{fmt.Sprintf("text rate, %d deltas (%d ACP updates)", deltas, acpUpdates), mibps(acpRate), mibps(goRate) + " Go client", ratio, "≥ 0.5×", table.Verdict(ratio >= 0.5)},
		{"  reply streamed, ACP client", ms(acpTook), ms(goTook) + " Go client", table.Ratio(acpTook, goTook), "-", "info"},
		{"  text delivered, ACP client", fmt.Sprintf("%d B", acpText), fmt.Sprintf("%d B", goText), float64(acpText) / float64(goText), "-", "info"},
	}, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func mibps(r float64) string { return fmt.Sprintf("%.1f MiB/s", r/(1<<20)) }
