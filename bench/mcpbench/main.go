// Command mcpbench measures MCP tools in agentd beside anchors run in the
// same process:
//
//   - step: an agent step that calls a stdio MCP server's echo tool (the
//     model's call, the call to the server and back, their records and
//     deltas), in turns of 50 such steps on a real host and worker, beside
//     the same turns calling the built-in read tool on a small file. Goal:
//     at most 1.5×. The server answers by hand, so that the figure is
//     agentd's; a second row shows the same with a server on go-sdk's
//     server side, whose own cost a call also pays.
//   - first turn: `agentd run` of a new session's first turn when the
//     session has 3 stdio MCP servers (its worker starts them, in its
//     sandbox, and the turn waits until they are ready), beside the same
//     with none, on a host already running. Goal: at most 2×.
//
// The MCP servers are ./bench/mcpbench/rawserver, built first, which
// answers by hand and links the standard library alone (what agentd adds
// is measured, not a server's own start), and this binary serving go-sdk's
// server side on stdio for the informational rows; everything else is
// agentd's own processes, run by this binary too, with the offline model
// playing a script.
//
// Run it from the module root:
//
//	go run ./bench/mcpbench
//	go run ./bench/mcpbench -steps 500 -runs 9
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/bench/internal/harness"
	benchplace "github.com/agentd-dev/agentd/bench/internal/place"
	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
	agentmcp "github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/protocol"
)

// envServer makes this binary an MCP server with an echo tool on stdio,
// on go-sdk's server side.
const envServer = "AGENTD_BENCH_MCP_SERVER"

// rawServer is the executable of ./bench/mcpbench/rawserver, built into
// the run's directory.
var rawServer string

type row table.Row

func main() {
	switch os.Getenv(envServer) {
	case "sdk":
		os.Exit(serve())
	}
	asagentd.Main()
	steps := flag.Int("steps", 50, "step: agent steps of each turn")
	runs := flag.Int("runs", 7, "turns (step) and new sessions (first turn) of each side; the median is reported")
	sandboxMode := flag.String("sandbox", "", "first turn: the sessions' sandbox (agentd run --sandbox); empty: agentd's default")
	keep := flag.Bool("keep", false, "keep the homes (their host.log) for a look afterwards")
	skip := flag.String("skip", "", "parts to skip, comma-separated: step, first")
	flag.Parse()
	if *sandboxMode != "" {
		runFlags = []string{"--sandbox", *sandboxMode}
	}
	base, err := os.MkdirTemp("", "mcpb")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var places []*place
	harness.Run("mcpbench", func(ctx context.Context) error {
		rawServer = filepath.Join(base, "rawserver")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", rawServer, "./bench/mcpbench/rawserver").CombinedOutput(); err != nil {
			return fmt.Errorf("building the server (run from the module root): %w: %s", err, out)
		}
		var rows []row
		kept := func(p *place) { places = append(places, p) }
		skipped := strings.Split(*skip, ",")
		if !slices.Contains(skipped, "step") {
			step, err := benchStep(ctx, base, *steps, *runs, kept)
			if err != nil {
				return fmt.Errorf("step: %w", err)
			}
			rows = append(rows, step...)
		}
		if !slices.Contains(skipped, "first") {
			first, err := benchFirstTurn(ctx, base, *runs, kept)
			if err != nil {
				return fmt.Errorf("first turn: %w", err)
			}
			rows = append(rows, first...)
		}
		table.Print(os.Stdout, rows, 2)
		return nil
	}, func() {
		for _, p := range places {
			p.Command("shutdown", "--force").Run()
		}
		if *keep {
			fmt.Fprintf(os.Stderr, "mcpbench: the homes are kept in %s\n", base)
			return
		}
		os.RemoveAll(base)
	})
}

// serve is the MCP server on go-sdk's server side: echo, read-only.
func serve() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// benchStep times turns of steps calling the MCP echo tool, alternating
// with turns of steps calling read, on one session of a real host and
// worker: each step is the model's call, the tool's call, the records and
// deltas of both.
func benchStep(ctx context.Context, base string, steps, runs int, keep func(*place)) ([]row, error) {
	var replies []string
	turn := func(tool, args string) {
		for range steps {
			replies = append(replies, fmt.Sprintf(`{"steps":[{"tool":%q,"arguments":%s}]}`, tool, args))
		}
		replies = append(replies, `{"steps":[{"text":"done"}]}`)
	}
	kinds := []struct{ name, tool, args string }{
		{"read", "read", `{"path":"hello.txt"}`},
		{"echo", "mcp__echo__echo", `{"text":"hello, bench"}`},
		{"sdk", "mcp__sdk__echo", `{"text":"hello, bench"}`},
	}
	for range runs + 1 { // the first round warms up
		for _, k := range kinds {
			turn(k.tool, k.args)
		}
	}
	p, err := newPlace(base, "step", map[string]string{"echo": "raw", "sdk": "sdk"}, `{"replies":[`+strings.Join(replies, ",")+`]}`)
	if err != nil {
		return nil, err
	}
	keep(p)
	if err := os.WriteFile(filepath.Join(p.Work, "hello.txt"), []byte("hello, bench\n"), 0o600); err != nil {
		return nil, err
	}
	c, err := p.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sess, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.Work, Approval: protocol.ApprovalAll, Model: "faux/" + faux.DefaultModel})
	if err != nil {
		return nil, err
	}
	s, err := c.OpenSession(ctx, sess.SessionID, client.SessionOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	times := map[string][]time.Duration{}
	n := 0
	for round := range runs + 1 {
		for _, k := range kinds {
			n++
			began := time.Now()
			if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: sess.SessionID, TurnID: fmt.Sprintf("t%d", n), Content: protocol.Content{Text: k.name}}); err != nil {
				return nil, err
			}
			for {
				ev, err := s.Next(ctx)
				if err != nil {
					return nil, err
				}
				if tc := ev.Delta.ToolCall; ev.Delta.Event == protocol.EventToolCallEnd && tc != nil && tc.IsError {
					return nil, fmt.Errorf("%s: %s", tc.Name, tc.Output)
				}
				if ev.Delta.Event == protocol.EventRunEnd {
					if t := ev.Delta.Turn; t != nil && t.Status != protocol.TurnCompleted {
						return nil, fmt.Errorf("a turn ended %s: %s", t.Status, t.Error)
					}
					break
				}
			}
			if round > 0 {
				times[k.name] = append(times[k.name], time.Since(began)/time.Duration(steps+1))
			}
		}
	}
	r, e, g := median(times["read"]), median(times["echo"]), median(times["sdk"])
	re, rg := table.Ratio(e, r), table.Ratio(g, r)
	return []row{
		{"agent step calling a stdio MCP echo tool (median of turns)", e.Round(time.Microsecond).String(), "read: " + r.Round(time.Microsecond).String(), re, "≤ 1.5×", table.Verdict(re <= 1.5)},
		{"the same, the server on go-sdk's server side", g.Round(time.Microsecond).String(), "read: " + r.Round(time.Microsecond).String(), rg, "-", "-"},
	}, nil
}

// place is a home and working directory of agentd processes.
type place struct{ *benchplace.Place }

// newPlace makes a place whose user list of MCP servers has servers, by
// name: the kind each is ("raw": rawserver; "sdk": this binary on go-sdk's
// server side).
func newPlace(base, name string, servers map[string]string, script string) (*place, error) {
	p, err := benchplace.New(base, name, script)
	if err != nil {
		return nil, err
	}
	conf := map[string]map[string]any{}
	for name, kind := range servers {
		if kind == "raw" {
			conf[name] = map[string]any{"command": rawServer}
			continue
		}
		conf[name] = map[string]any{"command": p.Agentd[0], "env": map[string]string{envServer: kind}}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": conf})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(p.Home, agentmcp.UserFileName), b, 0o600); err != nil {
		return nil, err
	}
	return &place{p}, nil
}

// runFlags are agentd run's flags of a first turn.
var runFlags []string

// firstTurn times agent run of a new session, from its start to its exit.
func (p *place) firstTurn() (time.Duration, error) {
	began := time.Now()
	out, err := p.Command(append([]string{"run", "--cwd", p.Work, "--model", "faux/" + faux.DefaultModel}, append(runFlags, "hi")...)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	return time.Since(began), nil
}

// benchFirstTurn times first turns of new sessions with 3 MCP servers and
// with none, alternating, each place's host started once before.
func benchFirstTurn(_ context.Context, base string, runs int, keep func(*place)) ([]row, error) {
	// Each turn: one model call answering at once.
	script := `{"replies":[` + strings.TrimSuffix(strings.Repeat(`{"steps":[{"text":"hi"}]},`, runs+1), ",") + `]}`
	with, err := newPlace(base, "with", map[string]string{"s1": "raw", "s2": "raw", "s3": "raw"}, script)
	if err != nil {
		return nil, err
	}
	keep(with)
	withSDK, err := newPlace(base, "with-sdk", map[string]string{"s1": "sdk", "s2": "sdk", "s3": "sdk"}, script)
	if err != nil {
		return nil, err
	}
	keep(withSDK)
	without, err := newPlace(base, "without", nil, script)
	if err != nil {
		return nil, err
	}
	keep(without)
	for _, p := range []*place{with, withSDK, without} {
		if out, err := p.Command("status").CombinedOutput(); err != nil { // starts the host
			return nil, fmt.Errorf("starting a host: %w: %s", err, out)
		}
		if _, err := p.firstTurn(); err != nil { // warms the page cache
			return nil, err
		}
	}
	var withTimes, sdkTimes, withoutTimes []time.Duration
	for range runs {
		for _, side := range []struct {
			p     *place
			times *[]time.Duration
		}{{with, &withTimes}, {withSDK, &sdkTimes}, {without, &withoutTimes}} {
			d, err := side.p.firstTurn()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(filepath.Dir(side.p.Home)), err)
			}
			*side.times = append(*side.times, d)
		}
	}
	w, g, n := median(withTimes), median(sdkTimes), median(withoutTimes)
	ratio, rg := table.Ratio(w, n), table.Ratio(g, n)
	none := "none: " + n.Round(time.Millisecond).String()
	return []row{
		{"first turn of a new session with 3 stdio MCP servers (median)", w.Round(time.Millisecond).String(), none, ratio, "≤ 2×", table.Verdict(ratio <= 2)},
		{"the same, the servers on go-sdk's server side (this 27 MB binary)", g.Round(time.Millisecond).String(), none, rg, "-", "-"},
	}, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
