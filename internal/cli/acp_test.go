package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
)

// editor is an ACP client driving `agentd acp` as a subprocess, as an
// editor does.
type editor struct {
	t    *testing.T
	cmd  *exec.Cmd
	conn *sdk.ClientSideConnection
	in   io.WriteCloser
	// answer, when set, answers a permission request; nil leaves it
	// waiting until it is cancelled.
	answer func(sdk.RequestPermissionRequest) *sdk.PermissionOptionId

	mu      sync.Mutex
	updates []sdk.SessionNotification
	asked   []sdk.RequestPermissionRequest
	ended   []error // how each permission request ended: nil when answered here
}

func (p *place) editor(answer func(sdk.RequestPermissionRequest) *sdk.PermissionOptionId) *editor {
	p.t.Helper()
	cmd := p.command("acp", "--log-level", "info")
	in, err := cmd.StdinPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	var stderr agentdtest.LockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	e := &editor{t: p.t, cmd: cmd, in: in, answer: answer}
	e.conn = sdk.NewClientSideConnection(e, in, out)
	e.conn.SetLogger(slog.New(slog.DiscardHandler))
	p.t.Cleanup(func() {
		e.close()
		if p.t.Failed() {
			p.t.Logf("agentd acp's stderr:\n%s", stderr.String())
		}
	})
	ctx := agentdtest.Context(p.t)
	init, err := e.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	if err != nil {
		p.t.Fatalf("initialize: %v", err)
	}
	if init.ProtocolVersion != sdk.ProtocolVersionNumber || !init.AgentCapabilities.LoadSession {
		p.t.Fatalf("initialize: %+v", init)
	}
	return e
}

// close ends the editor: its end of the pipe closed, it waits for agentd
// acp to exit.
func (e *editor) close() {
	e.in.Close()
	if e.cmd.ProcessState == nil {
		waitCommand(e.t, e.cmd, "agentd acp")
		<-e.conn.Done()
	}
}

func (e *editor) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, errors.New("not offered")
}

func (e *editor) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, errors.New("not offered")
}

func (e *editor) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	e.mu.Lock()
	e.asked = append(e.asked, p)
	answer := e.answer
	e.mu.Unlock()
	if answer != nil {
		if id := answer(p); id != nil {
			e.mu.Lock()
			e.ended = append(e.ended, nil)
			e.mu.Unlock()
			return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(*id)}, nil
		}
	}
	<-ctx.Done()
	e.mu.Lock()
	e.ended = append(e.ended, ctx.Err())
	e.mu.Unlock()
	return sdk.RequestPermissionResponse{}, ctx.Err()
}

func (e *editor) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.updates = append(e.updates, n)
	return nil
}

func (e *editor) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errors.New("not offered")
}

func (e *editor) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errors.New("not offered")
}

func (e *editor) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errors.New("not offered")
}

func (e *editor) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errors.New("not offered")
}

func (e *editor) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errors.New("not offered")
}

// seen returns the updates so far, each as one line: its kind and text.
func (e *editor) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	lines := make([]string, 0, len(e.updates))
	for _, n := range e.updates {
		lines = append(lines, describe(n.Update))
	}
	return lines
}

// saw reports whether an update has a line holding want.
func (e *editor) saw(want string) bool {
	return slices.ContainsFunc(e.seen(), func(l string) bool { return strings.Contains(l, want) })
}

func (e *editor) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.updates)
}

// describe is one update as a line of text: its kind, then what it says.
func describe(u sdk.SessionUpdate) string {
	text := func(c sdk.ContentBlock) string {
		if c.Text != nil {
			return c.Text.Text
		}
		return "?"
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	content := func(cs []sdk.ToolCallContent) string {
		var parts []string
		for _, c := range cs {
			switch {
			case c.Content != nil:
				parts = append(parts, text(c.Content.Content))
			case c.Diff != nil:
				parts = append(parts, "diff "+c.Diff.Path)
			}
		}
		return strings.Join(parts, "|")
	}
	switch {
	case u.UserMessageChunk != nil:
		return "user " + text(u.UserMessageChunk.Content)
	case u.AgentMessageChunk != nil:
		return "agent " + text(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		return "thought " + text(u.AgentThoughtChunk.Content)
	case u.ToolCall != nil:
		c := u.ToolCall
		return "tool_call " + string(c.ToolCallId) + " " + string(c.Kind) + " " + string(c.Status) + " " + c.Title + " " + content(c.Content)
	case u.ToolCallUpdate != nil:
		c := u.ToolCallUpdate
		status := ""
		if c.Status != nil {
			status = string(*c.Status)
		}
		return "tool_call_update " + string(c.ToolCallId) + " " + status + " " + str(c.Title) + " " + content(c.Content)
	case u.Plan != nil:
		var entries []string
		for _, en := range u.Plan.Entries {
			entries = append(entries, en.Content+":"+string(en.Status))
		}
		return "plan " + strings.Join(entries, ",")
	case u.SessionInfoUpdate != nil:
		return "session_info " + str(u.SessionInfoUpdate.Title)
	case u.CurrentModeUpdate != nil:
		return "mode " + string(u.CurrentModeUpdate.CurrentModeId)
	case u.ConfigOptionUpdate != nil:
		return "config_options"
	case u.UsageUpdate != nil:
		line := "usage " + strconv.Itoa(u.UsageUpdate.Used) + "/" + strconv.Itoa(u.UsageUpdate.Size)
		if c := u.UsageUpdate.Cost; c != nil {
			line += " " + strconv.FormatFloat(c.Amount, 'f', -1, 64) + " " + c.Currency
		}
		return line
	case u.AvailableCommandsUpdate != nil:
		var cmds []string
		for _, c := range u.AvailableCommandsUpdate.AvailableCommands {
			cmd := c.Name + ":" + c.Description
			if c.Input != nil && c.Input.Unstructured != nil {
				cmd += ":" + c.Input.Unstructured.Hint
			}
			cmds = append(cmds, cmd)
		}
		return "commands " + strings.Join(cmds, ",")
	}
	return "other"
}

func allowOnce(sdk.RequestPermissionRequest) *sdk.PermissionOptionId {
	return sdk.Ptr(sdk.PermissionOptionId("allow"))
}

// textOf joins the text of the editor's agent_message_chunk updates after
// update from.
func (e *editor) textOf(from int) string {
	var b strings.Builder
	for _, l := range e.seen()[from:] {
		if t, ok := strings.CutPrefix(l, "agent "); ok {
			b.WriteString(t)
		}
	}
	return b.String()
}

func TestACPPromptStreamsATurnWithAPermissionAndLoadReplaysIt(t *testing.T) {
	p := newPlace(t)
	cwd := t.TempDir()
	ctx := agentdtest.Context(t)
	a := p.editor(allowOnce)

	sess, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	if sess.Modes == nil || sess.Modes.CurrentModeId != "ask" || len(sess.ConfigOptions) != 2 {
		t.Fatalf("session/new: modes %+v, %d config options", sess.Modes, len(sess.ConfigOptions))
	}
	prompt := "run `echo hi`"
	resp, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock(prompt)}})
	if err != nil {
		t.Fatalf("session/prompt: %v", err)
	}
	if resp.StopReason != sdk.StopReasonEndTurn || resp.Usage == nil || resp.Usage.OutputTokens == 0 {
		t.Fatalf("session/prompt: %+v", resp)
	}
	// Every update of the turn came before its answer, in order.
	live := a.seen()
	order := []string{"tool_call ", "tool_call_update ", "hi", "completed", "I ran 1 command"}
	at := 0
	for _, l := range live {
		if at < len(order) && strings.Contains(l, order[at]) {
			at++
		}
	}
	if at < len(order) {
		t.Fatalf("the turn's updates lack %q in order; they were:\n%s", order[at], strings.Join(live, "\n"))
	}
	if slices.ContainsFunc(live, func(l string) bool { return strings.HasPrefix(l, "user ") }) {
		t.Errorf("the editor's own prompt came back as a user_message_chunk:\n%s", strings.Join(live, "\n"))
	}
	a.mu.Lock()
	asked := slices.Clone(a.asked)
	a.mu.Unlock()
	if len(asked) != 1 || asked[0].ToolCall.Title == nil || *asked[0].ToolCall.Title != "echo hi" || asked[0].ToolCall.Kind == nil || *asked[0].ToolCall.Kind != sdk.ToolKindExecute {
		t.Fatalf("permission requests: %+v", asked)
	}
	callID := asked[0].ToolCall.ToolCallId
	if !slices.ContainsFunc(live, func(l string) bool { return strings.HasPrefix(l, "tool_call "+string(callID)+" execute pending") }) {
		t.Errorf("the permission names tool call %s, which no tool_call announced:\n%s", callID, strings.Join(live, "\n"))
	}

	if _, err := a.conn.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: "key"}); err == nil || !strings.Contains(err.Error(), "agentd auth") || !strings.Contains(err.Error(), "faux") {
		t.Errorf("authenticate: %v", err)
	}
	// A cancel with no turn running does nothing.
	if err := a.conn.Cancel(ctx, sdk.CancelNotification{SessionId: sess.SessionId}); err != nil {
		t.Fatal(err)
	}

	// A second editor lists the session for its directory and loads it:
	// the history comes as updates before the answer.
	b := p.editor(allowOnce)
	list, err := b.conn.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: sdk.Ptr(cwd)})
	if err != nil {
		t.Fatalf("session/list: %v", err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].SessionId != sess.SessionId || list.Sessions[0].Cwd != cwd {
		t.Fatalf("session/list of %s: %+v", cwd, list)
	}
	if other, err := b.conn.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: sdk.Ptr(t.TempDir())}); err != nil || len(other.Sessions) != 0 {
		t.Fatalf("session/list of another directory: %+v, %v", other, err)
	}
	if _, err := b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	replayed := b.seen()
	want := []string{
		"user " + prompt,
		"agent Running `echo hi`.",
		"tool_call " + string(callID) + " execute completed echo hi hi\nexit code 0",
	}
	if len(replayed) < len(want)+1 || !slices.Equal(replayed[:len(want)], want) || !strings.HasPrefix(replayed[len(want)], "agent I ran 1 command") {
		t.Fatalf("session/load replayed:\n%s\nwant it to start:\n%s", strings.Join(replayed, "\n"), strings.Join(want, "\n"))
	}
	// The replayed text is the text the first editor saw live.
	if got, was := b.textOf(0), a.textOf(0); got != was {
		t.Errorf("replayed text %q, live text %q", got, was)
	}

	// session/resume attaches without history; session/close lets go.
	c := p.editor(allowOnce)
	if _, err := c.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sess.SessionId, Cwd: cwd}); err != nil {
		t.Fatalf("session/resume: %v", err)
	}
	// Only the context's usage, no history.
	if seen := c.seen(); slices.ContainsFunc(seen, func(l string) bool { return !strings.HasPrefix(l, "usage ") }) {
		t.Fatalf("session/resume sent %d updates: %v", len(seen), seen)
	}
	if _, err := c.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: sess.SessionId}); err != nil {
		t.Fatalf("session/close: %v", err)
	}
	if _, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hello")}}); err == nil {
		t.Fatal("a prompt on a closed session was taken")
	}
}

func TestACPTwoEditorsShareALiveTurn(t *testing.T) {
	p := newPlace(t)
	cwd := t.TempDir()
	ctx := agentdtest.Context(t)
	answeredByB := make(chan struct{})
	a := p.editor(nil) // never answers: B does
	b := p.editor(func(sdk.RequestPermissionRequest) *sdk.PermissionOptionId {
		defer close(answeredByB)
		return sdk.Ptr(sdk.PermissionOptionId("allow"))
	})
	sess, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	// The command waits for a file, so the turn runs until the test
	// says.
	gate := filepath.Join(cwd, "gate")
	prompt := "run `while [ ! -e gate ]; do sleep 0.02; done; echo through`"
	answered := make(chan error, 1)
	go func() {
		_, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock(prompt)}})
		answered <- err
	}()
	// The permission goes to both; B's answer wins and A's request is
	// withdrawn.
	<-answeredByB
	poll.Until(t, "the first editor's permission request to be withdrawn", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.asked) == 1 && len(a.ended) == 1
	})
	if !b.saw("user " + prompt) {
		t.Errorf("the second editor saw no user_message_chunk of the first's prompt:\n%s", strings.Join(b.seen(), "\n"))
	}
	poll.Until(t, "both editors to see the command run", func() bool {
		return a.saw("tool_call_update") && b.saw("in_progress")
	})
	// A third editor loads the session mid-turn: the history, then the
	// command running, then the rest live.
	c := p.editor(allowOnce)
	if _, err := c.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the editor loading mid-turn to see the command running", func() bool {
		return slices.ContainsFunc(c.seen(), func(l string) bool {
			return strings.HasPrefix(l, "tool_call_update ") && strings.Contains(l, "in_progress")
		})
	})
	if joined := c.seen(); joined[0] != "user "+prompt {
		t.Fatalf("an editor loading the session mid-turn got:\n%s", strings.Join(joined, "\n"))
	}
	// The first editor goes mid-turn: the turn runs on, and the others
	// see it end.
	a.close()
	if err := <-answered; err == nil {
		t.Error("the prompt of an editor that went was answered as if its turn ended")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the other editors to see the turn end", func() bool {
		return strings.Contains(b.textOf(0), "through") && strings.Contains(c.textOf(0), "through")
	})
	out := p.mustRun("log", string(sess.SessionId))
	if !strings.Contains(out, "through") {
		t.Errorf("agentd log lacks the turn's end:\n%s", out)
	}
}

// rawACP is agentd acp driven line by line, for input no client library
// sends.
type rawACP struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *place) rawACP() *rawACP {
	cmd := p.command("acp")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	r := &rawACP{t: p.t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	r.out.Buffer(nil, 16<<20)
	p.t.Cleanup(func() {
		in.Close()
		waitCommand(p.t, cmd, "agentd acp")
	})
	return r
}

func (r *rawACP) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// response reads lines until the response to id, and returns it.
func (r *rawACP) response(id int) map[string]any {
	r.t.Helper()
	for r.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(r.out.Bytes(), &m); err != nil {
			r.t.Fatalf("agentd acp wrote %q: %v", r.out.Text(), err)
		}
		if got, ok := m["id"].(float64); ok && int(got) == id {
			return m
		}
	}
	r.t.Fatalf("agentd acp ended before answering request %d: %v", id, r.out.Err())
	return nil
}

func TestACPBadInputIsRefusedAndTheConnectionGoesOn(t *testing.T) {
	p := newPlace(t)
	r := p.rawACP()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := r.response(1); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	cases := []struct {
		line string
		code float64
		says string
	}{
		{`{"jsonrpc":"2.0","id":2,"method":"no/such","params":{}}`, -32601, ""},
		{`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"nosuch","prompt":[{"type":"text","text":"hi"}]}}`, -32602, "sessionId"},
		{`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}`, -32602, "cwd"},
		{`{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"nosuch","cwd":"/","mcpServers":[]}}`, -32602, "nosuch"},
		{`{"jsonrpc":"2.0","id":6,"method":"session/set_mode","params":{"sessionId":"nosuch","modeId":"all"}}`, -32602, "sessionId"},
	}
	// A line that is not JSON and a cancel of a session with no turn
	// come first: neither is answered, and neither ends the connection.
	r.send(`{this is not json`)
	r.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nosuch"}}`)
	for i, c := range cases {
		r.send(c.line)
		m := r.response(i + 2)
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != c.code {
			t.Errorf("%s: answered %v, want error code %v", c.line, m, c.code)
			continue
		}
		if msg, _ := e["message"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: message %q does not name %q", c.line, msg, c.says)
		}
	}
}

// rssKiB is the resident memory of process pid, in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func TestACPAnEditorThatNeverReadsLeavesAgentdBoundedAndTheSessionUnharmed(t *testing.T) {
	p := newPlace(t)
	// Three replies of 14 MiB of text, each in 140,000 deltas (a record
	// holds at most 16 MiB).
	chunk := strings.Repeat("x", 104) + " "
	big := `{"steps":[{"repeat":140000,"text":"` + chunk + `"}]}`
	writeScript(t, p, `{"replies":[`+big+`,`+big+`,`+big+`,{"steps":[{"text":"last turn"}]}]}`)
	r := p.rawACP()
	cwd := t.TempDir()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	r.response(1)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":` + strconv.Quote(cwd) + `,"mcpServers":[]}}`)
	res, _ := r.response(2)["result"].(map[string]any)
	id, _ := res["sessionId"].(string)
	if id == "" {
		t.Fatalf("session/new: %v", res)
	}
	// From now on nobody reads what agentd acp writes. The first reply
	// fills what it holds for its editor; the next two add nothing.
	turn := func() {
		t.Helper()
		if _, errOut, code := p.run("run", "--session", id, "go"); code != 0 {
			t.Fatalf("a turn failed: %s", errOut)
		}
	}
	turn()
	filled := rssKiB(t, r.cmd.Process.Pid)
	turn()
	turn()
	grew := rssKiB(t, r.cmd.Process.Pid) - filled
	t.Logf("agentd acp held %d KiB after the first reply, and grew by %d KiB over the next two", filled, grew)
	// Holding the replies would take at least their 28 MiB; what is
	// measured moves by a few MiB with the collector's timing.
	if grew >= 28<<10 {
		t.Errorf("agentd acp grew by %d KiB over 28 MiB of replies its editor read nothing of", grew)
	}
	// The session goes on, for another client.
	out := p.mustRun("run", "--session", id, "again")
	if !strings.Contains(out, "last turn") {
		t.Errorf("the next turn: %q", out)
	}
}

func TestACPModeAndConfigOptionsReachTheSession(t *testing.T) {
	p := newPlace(t)
	cwd := t.TempDir()
	ctx := agentdtest.Context(t)
	e := p.editor(nil) // a permission request would wait: none must come
	sess, err := e.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: "nosuch"}); err == nil || !strings.Contains(err.Error(), "modeId") {
		t.Errorf("an unknown mode: %v", err)
	}
	if _, err := e.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: "all"}); err != nil {
		t.Fatal(err)
	}
	opts, err := e.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{SessionId: sess.SessionId, ConfigId: "thinking", Value: "high"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.ConfigOptions) != 2 || opts.ConfigOptions[1].Select == nil || opts.ConfigOptions[1].Select.CurrentValue != "high" {
		t.Fatalf("config options after thinking high: %+v", opts.ConfigOptions)
	}
	if _, err := e.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{SessionId: sess.SessionId, ConfigId: "colour", Value: "red"}}); err == nil || !strings.Contains(err.Error(), "configId") {
		t.Errorf("an unknown option: %v", err)
	}
	resp, err := e.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("run `echo hi`")}})
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("session/prompt: %+v, %v", resp, err)
	}
	e.mu.Lock()
	asked := len(e.asked)
	e.mu.Unlock()
	if asked != 0 {
		t.Errorf("%d permission requests under mode all", asked)
	}
	if !e.saw("mode all") || !e.saw("thought ") {
		t.Errorf("no mode update or no thinking:\n%s", strings.Join(e.seen(), "\n"))
	}
	var st struct {
		Approval, Thinking string
	}
	if err := json.Unmarshal([]byte(p.mustRun("ls", "--json")), &[]any{&st}); err != nil {
		t.Fatal(err)
	}
	if st.Approval != "all" || st.Thinking != "high" {
		t.Errorf("the session's policy and thinking: %+v", st)
	}
}

func TestACPCancelInterruptsTheTurnAndAnotherEditorsQueuedPromptRunsAfter(t *testing.T) {
	p := newPlace(t)
	cwd := t.TempDir()
	ctx := agentdtest.Context(t)
	a := p.editor(allowOnce)
	b := p.editor(allowOnce)
	sess, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sess.SessionId, Cwd: cwd}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp sdk.PromptResponse
		err  error
	}
	prompt := func(e *editor, text string) <-chan answer {
		done := make(chan answer, 1)
		go func() {
			resp, err := e.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
			done <- answer{resp, err}
		}()
		return done
	}
	// A command that runs until it is interrupted.
	first := prompt(a, "run `while true; do sleep 0.02; done`")
	poll.Until(t, "the command to run", func() bool { return a.saw("in_progress") })
	queued := prompt(b, "and then say hello")
	poll.Until(t, "the second prompt to be queued", func() bool {
		return strings.Contains(p.mustRun("log", "--json", string(sess.SessionId)), `"queue_add"`)
	})
	if err := a.conn.Cancel(ctx, sdk.CancelNotification{SessionId: sess.SessionId}); err != nil {
		t.Fatal(err)
	}
	if got := <-first; got.err != nil || got.resp.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("the cancelled prompt answered %+v, %v", got.resp, got.err)
	}
	if got := <-queued; got.err != nil || got.resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("the queued prompt answered %+v, %v", got.resp, got.err)
	}
	poll.Until(t, "the first editor to see the queued prompt as the user's", func() bool { return a.saw("user and then say hello") })
}

func TestACPAnEditorGoesOnAcrossAnUpgradeMidTurn(t *testing.T) {
	p := newPlace(t)
	cwd := t.TempDir()
	ctx := agentdtest.Context(t)
	e := p.editor(allowOnce)
	sess, err := e.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		resp, err := e.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("run `while [ ! -e gate ]; do sleep 0.02; done; echo through`")}})
		if err == nil && resp.StopReason != sdk.StopReasonEndTurn {
			err = errors.New("stopped: " + string(resp.StopReason))
		}
		answered <- err
	}()
	poll.Until(t, "the command to run", func() bool { return e.saw("in_progress") })
	// The host is replaced while the turn runs; the editor's stream and
	// requests follow to the new one.
	p.mustRun("upgrade")
	if err := os.WriteFile(filepath.Join(cwd, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the prompt across the upgrade: %v", err)
	}
	if !strings.Contains(e.textOf(0), "through") {
		t.Errorf("the turn's end did not reach the editor:\n%s", strings.Join(e.seen(), "\n"))
	}
	resp, err := e.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hello again")}})
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("a prompt after the upgrade: %+v, %v", resp, err)
	}
}

func TestACPAgentdAnswerWinsOverAnEditorsPermissionRequest(t *testing.T) {
	p := newPlace(t)
	cwd := t.TempDir()
	ctx := agentdtest.Context(t)
	e := p.editor(nil) // asks, and waits for an answer from elsewhere
	sess, err := e.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan sdk.PromptResponse, 1)
	go func() {
		resp, _ := e.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("run `echo answered-elsewhere`")}})
		answered <- resp
	}()
	poll.Until(t, "the editor to be asked", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.asked) == 1
	})
	var pending []struct{ SessionID, InteractionID string }
	if err := json.Unmarshal([]byte(p.mustRun("answer", "--json")), &pending); err != nil || len(pending) != 1 {
		t.Fatalf("agentd answer --json: %+v, %v", pending, err)
	}
	p.mustRun("answer", pending[0].SessionID, pending[0].InteractionID, "allow")
	if resp := <-answered; resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("the prompt answered %+v", resp)
	}
	poll.Until(t, "the editor's request to be withdrawn", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.ended) == 1 && e.ended[0] != nil
	})
	if !strings.Contains(e.textOf(0), "answered-elsewhere") {
		t.Errorf("the command's output did not reach the editor:\n%s", strings.Join(e.seen(), "\n"))
	}
}
