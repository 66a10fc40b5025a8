package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// editorServer is the test MCP server as an editor gives it over ACP: its
// environment carries secret as ED_TOKEN, and its echo proves the server
// has it (by digest); name, when not "ed", names its echo instead, and
// starts, when set, notes each start.
func editorServer(name, secret, starts string) sdk.McpServer {
	env := []sdk.EnvVariable{{Name: envMCPServer, Value: "1"}, {Name: "ED_TOKEN", Value: secret}}
	if name == "ed" {
		env = append(env, sdk.EnvVariable{Name: envMCPProve, Value: "ED_TOKEN"})
	} else {
		env = append(env, sdk.EnvVariable{Name: envMCPServerName, Value: name})
	}
	if starts != "" {
		env = append(env, sdk.EnvVariable{Name: envMCPStarts, Value: starts})
	}
	return sdk.McpServer{Stdio: &sdk.McpServerStdio{Name: name, Command: os.Args[0], Args: []string{}, Env: env}}
}

// holding lists the files under the dirs that hold secret, but skip.
func holding(t *testing.T, secret, skip string, dirs ...string) []string {
	t.Helper()
	var found []string
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() || path == skip {
				return nil
			}
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), secret) {
				found = append(found, path)
			}
			return nil
		})
	}
	return found
}

// TestACPAnEditorsMCPServersBecomeTheSessionsAndTheirSecretStaysPut: an
// editor's stdio MCP server, its environment holding a key, becomes the
// session's own: a turn calls its tool; a second editor loading the
// session with the same list starts nothing twice, and one with another
// server adds it while the worker runs; the key is in no transcript, log,
// listing or command's environment, and a sandboxed command cannot read
// where it is kept; the session's next worker, on the next host, runs the
// server without any editor.
func TestACPAnEditorsMCPServersBecomeTheSessionsAndTheirSecretStaysPut(t *testing.T) {
	p := newSessionPlace(t)
	p.hostID = "00000000-0000-4000-8000-0000000000ac"
	p.extraEnv = append(p.extraEnv, "AGENTD_IDLE_GRACE=200ms")
	cwd := p.workDir()
	secret := "agentd-test-key-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	starts := filepath.Join(cwd, "mcp-starts-ed")
	ctx := agentdtest.Context(t)

	// The agent's command looks for the key in its environment and where
	// agentd keeps it.
	writeScript(t, p, fmt.Sprintf(`{"replies":[
		{"steps":[{"tool":"mcp__ed__echo","arguments":{"text":"hi"}}]},
		{"steps":[{"text":"called it"}]},
		{"steps":[{"tool":"bash","arguments":{"command":"env; cat %s/*"}}]},
		{"steps":[{"text":"looked"}]}
	]}`, filepath.Join(p.home, mcp.SessionDirName)))

	a := p.editor(allowOnce)
	init, err := a.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	if err != nil || !init.AgentCapabilities.McpCapabilities.Http || !init.AgentCapabilities.McpCapabilities.Sse {
		t.Fatalf("initialize: mcpCapabilities %+v, %v", init.AgentCapabilities.McpCapabilities, err)
	}
	ed := editorServer("ed", secret, starts)
	sess, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{ed}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	id := string(sess.SessionId)
	stored := mcp.SessionFile(p.home, id)
	if fi, err := os.Stat(stored); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the session's own servers are kept in %s: %v, %v", stored, fi, err)
	}

	resp, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("call the echo tool")}})
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("session/prompt: %+v, %v", resp, err)
	}
	proof := "ED_TOKEN sha256 " + provenDigest(secret) + " echoes: hi"
	if !a.saw(proof) || !a.saw("called it") {
		t.Fatalf("the turn's updates lack the tool's result %q:\n%s", proof, strings.Join(a.seen(), "\n"))
	}
	// A command of the agent sees neither the key in its environment nor
	// the file it is kept in.
	mark := a.mark()
	if _, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("look around")}}); err != nil {
		t.Fatalf("session/prompt: %v", err)
	}
	looked := strings.Join(a.seen()[mark:], "\n")
	if strings.Contains(looked, secret) || !strings.Contains(looked, "PATH=") || !strings.Contains(looked, "Permission denied") || !strings.Contains(looked, "looked") {
		t.Fatalf("the agent's command (its environment, then the file) saw:\n%s", looked)
	}

	// A second editor loads the session with the same list: nothing
	// starts twice.
	b := p.editor(allowOnce)
	if _, err := b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []sdk.McpServer{ed}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	// A third gives one more: it joins while the worker runs, and the
	// first is left as it is.
	c := p.editor(allowOnce)
	if _, err := c.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []sdk.McpServer{editorServer("ed2", secret, "")}}); err != nil {
		t.Fatalf("session/resume: %v", err)
	}
	if got := p.callTools(id, [][2]string{{"ed2", "x"}, {"ed", "y"}}); got[0] != "ed2 echoes: x" || got[1] != "ED_TOKEN sha256 "+provenDigest(secret)+" echoes: y" {
		t.Fatalf("the session's servers answered %q", got)
	}
	if w := serverStarts(t, starts); len(w) != 1 {
		t.Fatalf("the editor's server was started %d times by one worker: %v", len(w), w)
	}
	var listing struct {
		Servers []mcp.Server
	}
	out := p.mustRun("mcp", "ls", "--session", id, "--json")
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		t.Fatal(err)
	}
	if len(listing.Servers) != 2 || listing.Servers[0].Name != "ed" || listing.Servers[0].Scope != mcp.ScopeSession || listing.Servers[0].Env["ED_TOKEN"] != "…" {
		t.Errorf("mcp ls --session: %s", out)
	}
	// Removed through the CLI, the second stops.
	if out := p.mustRun("mcp", "rm", "ed2", "--session", id); !strings.Contains(out, "removed MCP server ed2") {
		t.Errorf("mcp rm --session: %s", out)
	}
	poll.Until(t, "ed2 to stop", func() bool {
		var tools protocol.MCPListResult
		json.Unmarshal([]byte(p.mustRun("mcp", "tools", "--json", id)), &tools)
		return len(tools.Servers) == 1 && tools.Servers[0].Name == "ed"
	})

	// The key is in no client's output and no file but its own.
	for _, args := range [][]string{
		{"log", id}, {"log", id, "--json"}, {"mcp", "ls", "--session", id}, {"mcp", "ls", "--session", id, "--json"},
		{"mcp", "tools", id, "--json"}, {"ps", id}, {"ps", id, "--json"}, {"ls", "--json"},
	} {
		if out := p.mustRun(args...); strings.Contains(out, secret) {
			t.Errorf("agentd %s shows the key:\n%s", strings.Join(args, " "), out)
		}
	}
	for _, e := range []*editor{a, b, c} {
		if strings.Contains(strings.Join(e.seen(), "\n"), secret) {
			t.Error("an editor was sent the key")
		}
	}
	if found := holding(t, secret, stored, p.home, p.rundir); len(found) > 0 {
		t.Errorf("files other than %s hold the key: %v", stored, found)
	}
	// Only the server's process has it in its environment.
	for pid := range runningIn(filepath.Dir(p.home)) {
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		args, _ := proc.Args(pid)
		if strings.Contains(string(env), secret) && !strings.Contains(string(env), envMCPServer+"=1") {
			t.Errorf("process %d (%v) has the key in its environment", pid, args)
		}
	}

	// The editors go; the worker and then the host retire. The next
	// host's worker for the session runs the server again, without an
	// editor.
	first := serverStarts(t, starts)[0]
	for _, e := range []*editor{a, b, c} {
		e.close()
	}
	waitGone(t, protocol.SocketPath(p.rundir, p.hostID), protocol.RegistrationPath(p.rundir, p.hostID))
	if got := p.callTools(id, [][2]string{{"ed", "back"}}); got[0] != "ED_TOKEN sha256 "+provenDigest(secret)+" echoes: back" {
		t.Fatalf("the next generation's server answered %q", got[0])
	}
	if w := serverStarts(t, starts); len(w) != 2 || w[1] == first {
		t.Fatalf("the server's starts, by worker: %v", w)
	}
	// Removing the session forgets its servers.
	p.mustRun("rm", id)
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Errorf("a removed session's servers are kept: %v", err)
	}
}

func TestACPAnEditorsBadMCPServersAreRefusedNamingTheField(t *testing.T) {
	p := newPlace(t)
	r := p.rawACP()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := r.response(1); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	stdio := func(name, command, extra string) string {
		return fmt.Sprintf(`{"name":%q,"command":%q,"args":[%s],"env":[]}`, name, command, extra)
	}
	many := make([]string, protocol.MaxSessionMCPServers+1)
	for i := range many {
		many[i] = stdio(fmt.Sprintf("s%d", i), "/bin/true", "")
	}
	cases := []struct {
		servers, says string
	}{
		{`{"command":"/bin/true","args":[],"env":[]}`, `mcpServers[0].name`},
		{stdio("a", "npx", ""), `mcpServers[0].command`},
		{stdio("a b", "/bin/true", ""), `mcpServers[0].name`},
		{stdio("plugin_x_y", "/bin/true", ""), `mcpServers[0].name`},
		{stdio("a", "/bin/true", "") + "," + stdio("a", "/bin/false", ""), `mcpServers[1].name`},
		{`{"name":"a","command":"/bin/true","args":[],"env":[{"name":"K=V","value":"sekrit-env"}]}`, `mcpServers[0].env[0].name`},
		{`{"name":"a","command":"/bin/true","args":[],"env":[{"name":"K","value":"1"},{"name":"K","value":"sekrit-env"}]}`, `mcpServers[0].env[1].name`},
		{`{"type":"http","name":"web","url":"ftp://sekrit-user@example.com/mcp","headers":[]}`, `mcpServers[0].url`},
		{`{"type":"http","name":"web","url":"","headers":[]}`, `mcpServers[0].url`},
		{`{"type":"sse","name":"web","url":"https://example.com/sse","headers":[{"name":"Authorization","value":"sekrit-header\r\nX: y"}]}`, `mcpServers[0].headers[0].value`},
		{`{"type":"http","name":"web","url":"https://example.com/mcp","headers":[{"name":"Bad Name","value":"sekrit-header"}]}`, `mcpServers[0].headers[0].name`},
		{strings.Join(many, ","), `at most 32 servers`},
		{stdio("big", "/bin/true", strconv.Quote(strings.Repeat("x", protocol.MaxMCPServerBytes))), `mcpServers[0]`},
	}
	for i, c := range cases {
		id := i + 2
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/","mcpServers":[%s]}}`, id, c.servers))
		m := r.response(id)
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if e == nil || e["code"] != float64(-32602) || !strings.Contains(msg, c.says) {
			t.Errorf("%.200s: answered %.300v, want invalid params naming %s", c.servers, m, c.says)
		}
		if strings.Contains(msg, "sekrit") {
			t.Errorf("the refusal quotes a value: %s", msg)
		}
	}
	// None made a session.
	if out := strings.TrimSpace(p.mustRun("ls", "--json")); out != "[]" {
		t.Errorf("sessions made of refused requests: %s", out)
	}
}

func TestACPAnEditorsHTTPServerIsReachedWithItsHeadersNeverShown(t *testing.T) {
	const header, query = "h-secret-4f1c", "q-secret-9a2e"
	s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "http-test", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	sdkmcp.AddTool(s, &sdkmcp.Tool{Name: "echo"}, func(_ context.Context, _ *sdkmcp.CallToolRequest, in text) (*sdkmcp.CallToolResult, any, error) {
		return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: "web echo: " + in.Text}}}, nil, nil
	})
	handler := sdkmcp.NewStreamableHTTPHandler(func(*http.Request) *sdkmcp.Server { return s }, &sdkmcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+header || r.URL.Query().Get("token") != query {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close) // after the place's hosts and workers are gone
	p := newPlace(t)
	ctx := agentdtest.Context(t)
	a := p.editor(allowOnce)
	web := sdk.McpServer{Http: &sdk.McpServerHttpInline{Type: "http", Name: "web", Url: srv.URL + "/mcp?token=" + query,
		Headers: []sdk.HttpHeader{{Name: "Authorization", Value: "Bearer " + header}}}}
	sess, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []sdk.McpServer{web}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	id := string(sess.SessionId)
	if got := p.callTools(id, [][2]string{{"web", "x"}}); got[0] != "web echo: x" {
		t.Fatalf("the editor's HTTP server answered %q", got[0])
	}
	for _, args := range [][]string{{"mcp", "ls", "--session", id}, {"mcp", "ls", "--session", id, "--json"}, {"ps", id}, {"ps", id, "--json"}, {"mcp", "tools", id, "--json"}} {
		out := p.mustRun(args...)
		if strings.Contains(out, header) || strings.Contains(out, query) {
			t.Errorf("agentd %s shows a key:\n%s", strings.Join(args, " "), out)
		}
		if args[0] == "ps" && !strings.Contains(out, srv.URL+"/mcp") {
			t.Errorf("agentd %s does not show the server's URL:\n%s", strings.Join(args, " "), out)
		}
	}
	stored := mcp.SessionFile(p.home, id)
	for _, secret := range []string{header, query} {
		if found := holding(t, secret, stored, p.home, p.rundir); len(found) > 0 {
			t.Errorf("files other than %s hold a key: %v", stored, found)
		}
	}
}
