package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// nodeClient is the ACP client on the reference TypeScript SDK; .ci/run
// installs its dependencies with npm ci from its lockfile.
var nodeClient = filepath.Join("..", "acp", "testdata", "node")

func TestACPNodeClientRunsATurnAndLoadsIt(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node in PATH: the Node ACP client runs where node is")
	}
	if _, err := os.Stat(filepath.Join(nodeClient, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Node ACP client's dependencies are not installed: .ci/run runs npm ci in %s first", nodeClient)
		}
		t.Skipf("the Node ACP client's dependencies are not installed: npm ci in %s (.ci/run does)", nodeClient)
	}
	p := newPlace(t)
	cwd := t.TempDir()
	// The model's window is known, so the turn's end sends usage_update.
	script := filepath.Join(t.TempDir(), "window.json")
	if err := os.WriteFile(script, []byte(`{"contextWindow": 8192}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p.extraEnv = append(p.extraEnv, "AGENTD_FAUX_SCRIPT="+script)
	cmd := exec.Command(node, "client.mjs", os.Args[0], "acp")
	cmd.Dir = nodeClient
	// The editor gives the session an MCP server as it loads it: the
	// test's own, its key in its environment.
	servers, err := json.Marshal([]map[string]any{{
		"name": "node-ed", "command": os.Args[0], "args": []string{},
		"env": []map[string]string{{"name": envMCPServer, "value": "1"}, {"name": "NODE_ED_TOKEN", "value": "node-key-1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(p.env(), "AGENTD_ACP_CWD="+cwd, "AGENTD_ACP_MCP="+string(servers))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitCommand(t, cmd, "the Node ACP client"); err != nil {
		t.Fatalf("the Node ACP client: %v\n%s", err, stderr.String())
	}
	var got struct {
		LoadSession     bool
		MCPCapabilities struct{ HTTP, SSE bool } `json:"mcpCapabilities"`
		StopReason      string
		Asked           []string
		Live            []string
		Replayed        []string
		ReplayedText    string
		Listed          []string
		SessionID       string
		Unknown         any
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("the Node ACP client printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if !got.LoadSession || got.StopReason != "end_turn" || !slices.Equal(got.Asked, []string{"echo from-node"}) {
		t.Errorf("initialize, prompt or permission: %+v", got)
	}
	for _, want := range []string{"tool_call", "tool_call_update", "agent_message_chunk", "usage_update"} {
		if !slices.Contains(got.Live, want) {
			t.Errorf("no %s live: %v", want, got.Live)
		}
	}
	// History sends each tool call once, as it ended.
	if want := []string{"user_message_chunk", "agent_message_chunk", "tool_call", "agent_message_chunk", "usage_update"}; !slices.Equal(got.Replayed, want) {
		t.Errorf("session/load replayed %v, want %v", got.Replayed, want)
	}
	if !strings.Contains(got.ReplayedText, "from-node") {
		t.Errorf("session/load replayed the text %q", got.ReplayedText)
	}
	if !slices.Equal(got.Listed, []string{got.SessionID}) {
		t.Errorf("session/list of the directory: %v, want %s", got.Listed, got.SessionID)
	}
	if got.Unknown != float64(-32601) {
		t.Errorf("an unknown method answered %v, want -32601", got.Unknown)
	}
	if !got.MCPCapabilities.HTTP || !got.MCPCapabilities.SSE {
		t.Errorf("mcpCapabilities: %+v", got.MCPCapabilities)
	}
	// The server is the session's, its key not shown.
	if got := p.callTools(got.SessionID, [][2]string{{"node-ed", "from node"}}); got[0] != "echo: from node" {
		t.Errorf("the Node editor's MCP server answered %q", got[0])
	}
	if out := p.mustRun("mcp", "ls", "--session", got.SessionID); !strings.Contains(out, "node-ed") || !strings.Contains(out, "session") || strings.Contains(out, "node-key-1") {
		t.Errorf("mcp ls --session:\n%s", out)
	}
}
