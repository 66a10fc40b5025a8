package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/protocol"
)

// envMCPServer makes the test binary a small MCP server on stdio (go-sdk's
// server side): echo (read-only), touch (not) and env.
const envMCPServer = "AGENTD_CLI_TEST_MCP_SERVER"

// The test server's optional settings: envMCPStarts names a file it
// appends a line to as it starts, its parent's pid (its worker's); with
// envMCPServerName its echo says whose it is.
const (
	envMCPStarts     = "AGENTD_CLI_TEST_MCP_STARTS"
	envMCPServerName = "AGENTD_CLI_TEST_MCP_NAME"
	// envMCPProve names a variable of its environment: its echo then
	// says the variable's digest (provenDigest), never its value.
	envMCPProve = "AGENTD_CLI_TEST_MCP_PROVE"
)

// provenDigest is what the test server's echo says of the value of the
// variable envMCPProve names.
func provenDigest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:6])
}

func serveMCP() int {
	if path := os.Getenv(envMCPStarts); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			_, err = fmt.Fprintf(f, "%d\n", os.Getppid())
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	echo := "echo: "
	if name := os.Getenv(envMCPServerName); name != "" {
		echo = name + " echoes: "
	}
	if v := os.Getenv(envMCPProve); v != "" {
		echo = v + " sha256 " + provenDigest(os.Getenv(v)) + " echoes: "
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: echo + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Changes nothing, but does not say so."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Answers its environment.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
	fmt.Fprintln(os.Stderr, "cli test MCP server ready")
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return 0
}

// mcpProject writes a project's .mcp.json naming the test server go.
func mcpProject(t *testing.T, dir string) {
	t.Helper()
	conf := fmt.Sprintf(`{"mcpServers": {"go": {"command": %q, "env": {%q: "1"}}}}`, os.Args[0], envMCPServer)
	if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestProjectMCPServerRunsOnceTrustedAndItsToolJoinsATurn(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	mcpProject(t, dir)
	var listing struct {
		Servers []struct {
			Name    string
			Scope   string
			Trusted bool
		}
		Problems []string
	}
	if err := json.Unmarshal([]byte(p.mustRun("mcp", "ls", "--json", dir)), &listing); err != nil {
		t.Fatal(err)
	}
	if len(listing.Servers) != 1 || listing.Servers[0].Name != "go" || listing.Servers[0].Trusted || len(listing.Problems) != 0 {
		t.Fatalf("an untrusted project's listing: %+v", listing)
	}
	writeScript(t, p, `{"replies":[
		{"steps":[{"tool":"mcp__go__echo","arguments":{"text":"hi"}}]},
		{"steps":[{"text":"called it"}]},
		{"steps":[{"tool":"mcp__go__echo","arguments":{"text":"hi"}}]},
		{"steps":[{"text":"no such tool"}]}
	]}`)
	// Untrusted, the project's server does not run: the model's call
	// names no tool.
	out, errOut, code := p.run("run", "--cwd", dir, "call the echo tool")
	if code != 0 || !strings.Contains(out+errOut, "there is no tool named") {
		t.Fatalf("untrusted: exit %d\n%s\n%s", code, out, errOut)
	}
	if out := p.mustRun("mcp", "trust", dir); !strings.Contains(out, "trusted "+dir) {
		t.Fatalf("trust: %s", out)
	}
	writeScript(t, p, `{"replies":[
		{"steps":[{"tool":"mcp__go__echo","arguments":{"text":"hi"}}]},
		{"steps":[{"text":"called it"}]}
	]}`)
	out, errOut, code = p.run("run", "--cwd", dir, "call the echo tool")
	if code != 0 || !strings.Contains(out, "echo: hi") || !strings.Contains(out, "called it") {
		t.Fatalf("trusted: exit %d\n%s\n%s", code, out, errOut)
	}
	id := sessionIDFrom(t, errOut)
	if log := p.mustRun("log", id); !strings.Contains(log, "mcp__go__echo") || !strings.Contains(log, "echo: hi") {
		t.Errorf("log:\n%s", log)
	}
	// A client calls the server's tools through the host.
	if out := p.mustRun("mcp", "call", "--session", id, "go", "echo", `{"text":"from a client"}`); strings.TrimSpace(out) != "echo: from a client" {
		t.Errorf("mcp call: %q", out)
	}
	// A worker started anew (the last one idled out) lists its server as
	// starting until it is ready.
	var tools protocol.MCPListResult
	poll.Until(t, "the session's MCP server to be ready", func() bool {
		if err := json.Unmarshal([]byte(p.mustRun("mcp", "tools", "--json", id)), &tools); err != nil {
			t.Fatal(err)
		}
		return len(tools.Servers) == 1 && tools.Servers[0].Status != protocol.ServiceStarting
	})
	if len(tools.Servers) != 1 || tools.Servers[0].Status != protocol.ServiceReady || len(tools.Servers[0].Tools) != 3 || tools.Servers[0].Tools[0].AgentName != "mcp__go__echo" {
		t.Errorf("mcp tools: %+v", tools)
	}
	var rs []protocol.Resource
	if err := json.Unmarshal([]byte(p.mustRun("ps", "--json", id)), &rs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rs {
		found = found || (r.Kind == protocol.ResourceMCP && r.Name == "go")
	}
	if !found {
		t.Errorf("ps lists no MCP server: %+v", rs)
	}
	if out := p.mustRun("ps", id); !strings.Contains(out, "go: "+os.Args[0]) {
		t.Errorf("ps:\n%s", out)
	}
	// Its stderr is its resource's log (copied there as the server writes
	// it, which its start does not wait for).
	poll.Until(t, "the server's stderr in its log", func() bool {
		return strings.Contains(p.mustRun("logs", id, tools.Servers[0].Ref), "cli test MCP server ready")
	})
}

func TestMCPToolWithoutReadOnlyHintIsRefusedUnderReadOnlyAndEnvHasNoKeys(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	p.extraEnv = append(p.extraEnv, "OPENAI_API_KEY=sk-test-secret-key-for-mcp-0123456789")
	if _, errOut, code := p.run("mcp", "add", "go", "--env", envMCPServer+"=1", "--", os.Args[0]); code != 0 {
		t.Fatalf("mcp add: %s", errOut)
	}
	writeScript(t, p, `{"replies":[
		{"steps":[{"tool":"mcp__go__touch","arguments":{}}]},
		{"steps":[{"text":"refused"}]}
	]}`)
	out, errOut, code := p.run("run", "--cwd", dir, "--model", "faux/echo", "--approve", "read-only", "touch it")
	if code != 0 || !strings.Contains(out+errOut, "read-only, which refuses mcp__go__touch") {
		t.Fatalf("read-only: exit %d\n%s\n%s", code, out, errOut)
	}
	id := sessionIDFrom(t, errOut)
	env := p.mustRun("mcp", "call", "--session", id, "go", "env")
	if strings.Contains(env, "sk-test-secret") || strings.Contains(env, "OPENAI_API_KEY") || !strings.Contains(env, envMCPServer+"=1") {
		t.Errorf("the server's environment:\n%s", env)
	}
	if _, errOut, code := p.run("mcp", "call", "--session", id, "nope", "echo"); code == 0 || !strings.Contains(errOut, `"nope" is none of the session's MCP servers (go)`) {
		t.Errorf("a call to an unknown server: exit %d %s", code, errOut)
	}
	if _, errOut, code := p.run("mcp", "add", "bad name", "--", "x"); code != 2 || !strings.Contains(errOut, "NAME") {
		t.Errorf("add with a bad name: exit %d %s", code, errOut)
	}
	if out := p.mustRun("mcp", "rm", "go"); !strings.Contains(out, "removed") {
		t.Errorf("rm: %s", out)
	}
	bare := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	if _, errOut, code := p.run("mcp", "call", "--session", bare, "go", "echo"); code == 0 || !strings.Contains(errOut, `"go": the session has no MCP server`) {
		t.Errorf("a call in a session without servers: exit %d %s", code, errOut)
	}
}

// TestAWorkerWhoseMCPServerRunsStopsOnceIdle: an MCP server runs as long
// as its worker does and does not hold it: the worker of a session whose
// server runs stops once no client holds it, its server with it.
func TestAWorkerWhoseMCPServerRunsStopsOnceIdle(t *testing.T) {
	p := newSessionPlace(t) // a worker idles out after 200ms
	if _, errOut, code := p.run("mcp", "add", "go", "--env", envMCPServer+"=1", "--", os.Args[0]); code != 0 {
		t.Fatalf("mcp add: %s", errOut)
	}
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	if out := p.mustRun("mcp", "call", "--session", id, "go", "echo", `{"text":"hi"}`); strings.TrimSpace(out) != "echo: hi" {
		t.Fatalf("mcp call: %q", out)
	}
	waitGone(t, home.WorkerRegistrationPath(p.home, id))
}
