package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// writeKit writes a plugin package in Claude Code's layout under the
// place's base: its files by path relative to the package.
func writeKit(t *testing.T, p *place, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(p.home), "kits", name)
	for rel, content := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// greetKit is a package with one command and one skill.
func greetKit(t *testing.T, p *place) string {
	return writeKit(t, p, "greet-kit", map[string]string{
		".claude-plugin/plugin.json": `{"name":"greet-kit","version":"1.0.0","description":"Greets people"}`,
		"commands/greet.md":          "---\ndescription: Greet someone\nargument-hint: <name>\n---\nGreet $1 warmly, by name.\n",
		"skills/manners/SKILL.md":    "---\nname: manners\ndescription: How to greet\n---\nBow slightly.\n",
	})
}

// withMCPServer gives the package in dir an .mcp.json naming the test
// MCP server svc: its echo says it is name's, and it notes each start in
// the session's directory (the one place its sandbox lets it write); it
// returns that file.
func (p *place) withMCPServer(dir, name string) string {
	p.t.Helper()
	starts := filepath.Join(p.workDir(), "mcp-starts-"+name)
	conf := fmt.Sprintf(`{"mcpServers": {"svc": {"command": %q, "args": ["${CLAUDE_PLUGIN_ROOT}"], "env": {%q: "1", %q: %q, %q: %q}}}}`,
		os.Args[0], envMCPServer, envMCPServerName, name, envMCPStarts, starts)
	if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(conf), 0o644); err != nil {
		p.t.Fatal(err)
	}
	return starts
}

// serverStarts returns, for each start of an MCP server that notes its
// starts in the file starts, the pid of the worker that started it.
func serverStarts(t *testing.T, starts string) []string {
	t.Helper()
	b, err := os.ReadFile(starts)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// callTools has clients call the tools of calls ({server, text}) at once
// through the host, each its own agentd mcp call, and returns their
// answers in order.
func (p *place) callTools(id string, calls [][2]string) []string {
	p.t.Helper()
	answers := make([]string, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "mcp", "call", "--session", id, c[0], "echo", fmt.Sprintf(`{"text":%q}`, c[1]))
			cmd.Env = p.env()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				p.t.Errorf("agentd mcp call %s: %v: %s", c[0], err, stderr.String())
			}
			answers[i] = strings.TrimSpace(string(out))
		})
	}
	wg.Wait()
	return answers
}

func (p *place) commandsJSON(id string) protocol.SessionCommandsResult {
	p.t.Helper()
	var res protocol.SessionCommandsResult
	if err := json.Unmarshal([]byte(p.mustRun("plugins", id, "--json")), &res); err != nil {
		p.t.Fatal(err)
	}
	return res
}

// logRecords returns the types and texts of a session's transcript.
func (p *place) userMessages(id string) []string {
	p.t.Helper()
	var texts []string
	for _, line := range strings.Split(strings.TrimSpace(p.mustRun("log", id, "--json")), "\n") {
		var rec struct {
			Type string
			Data struct{ Text string }
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			p.t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Type == protocol.RecordUserMessage {
			texts = append(texts, rec.Data.Text)
		}
	}
	return texts
}

// TestPluginPackagesPassedToAColdHostComeBackOnItsNextGeneration: agentd
// run --plugin starts a host (cold activation), and the session's worker
// loads the package: its command runs. Once that host has retired, the
// next command starts another host, which gives the session the same
// package without it being passed again: its worker loads it, once, its
// command runs, and a client calls its MCP server's tool through the host.
func TestPluginPackagesPassedToAColdHostComeBackOnItsNextGeneration(t *testing.T) {
	p := newSessionPlace(t)
	p.hostID = "00000000-0000-4000-8000-000000000001"
	p.extraEnv = append(p.extraEnv, "AGENTD_IDLE_GRACE=200ms")
	kit := greetKit(t, p)
	starts := p.withMCPServer(kit, "greet-kit")
	socket, registration := protocol.SocketPath(p.rundir, p.hostID), protocol.RegistrationPath(p.rundir, p.hostID)

	_, errOut, code := p.run("run", "--cwd", p.workDir(), "--plugin", kit, "/greet Ada")
	if code != 0 {
		t.Fatalf("first generation: exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	waitGone(t, socket, registration) // the first host retired

	res := p.commandsJSON(id) // a second host, started cold
	if len(res.Packages) != 1 || res.Packages[0].Dir != kit || res.Packages[0].Name != "greet-kit" || res.Packages[0].Activations != 1 || res.Packages[0].Error != "" {
		t.Fatalf("the next generation's packages: %+v", res.Packages)
	}
	if len(res.Commands) != 1 || res.Commands[0].Name != "greet" || res.Commands[0].ArgumentHint != "<name>" {
		t.Fatalf("the next generation's commands: %+v", res.Commands)
	}
	if _, errOut, code := p.run("run", "--session", id, "/greet Grace"); code != 0 {
		t.Fatalf("second generation: exit %d: %s", code, errOut)
	}
	if got := p.callTools(id, [][2]string{{"plugin_greet-kit_svc", "again"}}); got[0] != "greet-kit echoes: again" {
		t.Fatalf("the package's MCP tool on a later generation answered %q", got[0])
	}
	// Each worker started the package's server once at most (the first
	// one may have stopped before it had).
	workers := serverStarts(t, starts)
	if len(workers) == 0 || len(slices.Compact(slices.Sorted(slices.Values(workers)))) != len(workers) {
		t.Fatalf("the package's server was started by the workers %v", workers)
	}
	got := p.userMessages(id)
	want := []string{"Greet Ada warmly, by name.\n", "Greet Grace warmly, by name.\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("prompts %q, want %q", got, want)
	}
	var sessions []protocol.Session
	json.Unmarshal([]byte(p.mustRun("ls", "--json")), &sessions)
	if len(sessions) != 1 || len(sessions[0].Plugins) != 1 || sessions[0].Plugins[0] != kit {
		t.Fatalf("ls: %+v", sessions)
	}
}

// TestSeveralPluginPackagesLoadSideBySideEachOncePerWorker: a session
// with two packages, each with an MCP server; through the host clients
// call each package's tool, at once, and a client lists both packages and
// runs a command of each, and the model loads a skill of each; the
// session's one worker loaded each package and started each server once,
// however many calls it served.
func TestSeveralPluginPackagesLoadSideBySideEachOncePerWorker(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(p.extraEnv, "AGENTD_WORKER_IDLE_GRACE=1h") // one worker for the whole test
	first := greetKit(t, p)
	second := writeKit(t, p, "second", map[string]string{
		".claude-plugin/plugin.json": `{"name":"second-session-plugin","version":"2.0.0"}`,
		"commands/read.md":           "Read the notes of ${CLAUDE_PLUGIN_ROOT} about $ARGUMENTS.",
		"commands/greet.md":          "The second package's greeting for $ARGUMENTS.",
		"skills/notes/SKILL.md":      "---\nname: notes\ndescription: \"Where the notes are\"\n---\nThe notes are second.\n",
	})
	firstStarts, secondStarts := p.withMCPServer(first, "greet-kit"), p.withMCPServer(second, "second")
	writeScript(t, p, `{"replies":[
		{"steps":[{"tool":"skill","arguments":{"name":"manners"},"id":"call-1"}]},
		{"steps":[{"tool":"skill","arguments":{"name":"notes"},"id":"call-2"}]},
		{"steps":[{"text":"loaded both"}]},
		{"steps":[{"text":"read"}]},
		{"steps":[{"text":"greeted"}]}
	]}`)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--plugin", first, "--plugin", second))

	// Two clients call each package's tool at once, as the worker starts.
	calls := [][2]string{
		{"plugin_greet-kit_svc", "one"}, {"plugin_second-session-plugin_svc", "two"},
		{"plugin_greet-kit_svc", "three"}, {"plugin_second-session-plugin_svc", "four"},
	}
	want := []string{"greet-kit echoes: one", "second echoes: two", "greet-kit echoes: three", "second echoes: four"}
	if got := p.callTools(id, calls); !slices.Equal(got, want) {
		t.Fatalf("the packages' tools answered %q, want %q", got, want)
	}
	onceEach := func(when string) {
		t.Helper()
		a, b := serverStarts(t, firstStarts), serverStarts(t, secondStarts)
		if len(a) != 1 || len(b) != 1 || a[0] != b[0] {
			t.Fatalf("%s: the packages' servers were started by the workers %v and %v, want once each by the session's one worker", when, a, b)
		}
		var rs []protocol.Resource
		if err := json.Unmarshal([]byte(p.mustRun("ps", "--json", id)), &rs); err != nil {
			t.Fatal(err)
		}
		var servers []string
		for _, r := range rs {
			if r.Kind == protocol.ResourceMCP {
				servers = append(servers, r.Name)
			}
		}
		if want := "plugin_greet-kit_svc|plugin_second-session-plugin_svc"; strings.Join(servers, "|") != want {
			t.Fatalf("%s: the session's MCP servers %q, want %q", when, servers, want)
		}
	}
	onceEach("after the concurrent calls")

	// The read-only policy refuses what changes things: the skill tool
	// runs under it.
	out := p.mustRun("run", "--session", id, "--approve", "read-only", "--json", "get ready")
	for _, want := range []string{"Bow slightly.", "The notes are second.", "loaded both"} {
		if !strings.Contains(out, want) {
			t.Errorf("the turn lacks %q:\n%s", want, out)
		}
	}
	p.mustRun("run", "--session", id, "/read the build")
	p.mustRun("run", "--session", id, "/greet-kit:greet Ada")
	if _, errOut, code := p.run("run", "--session", id, "/greet Ada"); code != 1 || !strings.Contains(errOut, "/greet-kit:greet or /second-session-plugin:greet") {
		t.Fatalf("an ambiguous command: exit %d: %s", code, errOut)
	}
	if _, errOut, code := p.run("run", "--session", id, "/nope"); code != 1 || !strings.Contains(errOut, "unknown command /nope") || !strings.Contains(errOut, "/read") {
		t.Fatalf("an unknown command: exit %d: %s", code, errOut)
	}

	res := p.commandsJSON(id)
	if len(res.Packages) != 2 {
		t.Fatalf("packages: %+v", res.Packages)
	}
	for i, want := range []struct{ dir, name string }{{first, "greet-kit"}, {second, "second-session-plugin"}} {
		if got := res.Packages[i]; got.Dir != want.dir || got.Name != want.name || got.Activations != 1 {
			t.Errorf("package %d: %+v, want %s from %s, loaded once", i, got, want.name, want.dir)
		}
	}
	var names []string
	for _, c := range res.Commands {
		names = append(names, c.Package+" "+c.Name)
	}
	if want := "greet-kit greet-kit:greet|second-session-plugin second-session-plugin:greet|second-session-plugin read"; strings.Join(names, "|") != want {
		t.Errorf("commands %q, want %q", names, want)
	}
	got := p.userMessages(id)
	want = []string{"get ready", "Read the notes of " + second + " about the build.", "Greet Ada warmly, by name.\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("prompts %q, want %q", got, want)
	}
	if got := p.callTools(id, calls[:2]); !slices.Equal(got, []string{"greet-kit echoes: one", "second echoes: two"}) {
		t.Fatalf("the packages' tools answered %q", got)
	}
	onceEach("after the turns and more calls")
}

// TestAPluginPackageThatDoesNotLoadIsRefusedNamingItsFileAndField: the
// host refuses a package before a session records it.
func TestAPluginPackageThatDoesNotLoadIsRefusedNamingItsFileAndField(t *testing.T) {
	p := newSessionPlace(t)
	bad := writeKit(t, p, "bad", map[string]string{".claude-plugin/plugin.json": `{"name":"bad kit"}`})
	_, errOut, code := p.run("new", "--cwd", p.workDir(), "--plugin", bad)
	if code != 1 || !strings.Contains(errOut, filepath.Join(bad, ".claude-plugin", "plugin.json")) || !strings.Contains(errOut, `field "name"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, errOut, code := p.run("new", "--cwd", p.workDir(), "--plugin", p.workDir()); code != 1 || !strings.Contains(errOut, "not a plugin package") {
		t.Fatalf("a directory without a manifest: exit %d: %s", code, errOut)
	}
	var sessions []protocol.Session
	json.Unmarshal([]byte(p.mustRun("ls", "--json")), &sessions)
	if len(sessions) != 0 {
		t.Fatalf("a refused session was created: %+v", sessions)
	}
}

// TestAttachRunsAPromptCommandTypedAsSlashName: in attach, /name args
// runs the command's prompt; an unknown one says which there are.
func TestAttachRunsAPromptCommandTypedAsSlashName(t *testing.T) {
	p := newSessionPlace(t)
	kit := greetKit(t, p)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--plugin", kit))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("/greet Ada")
	s.waitText("❯ Greet Ada warmly, by name.")
	s.waitText("── completed")
	s.typeLine("/nope")
	s.waitText("unknown command /nope: the session's commands are /greet")
}

// TestPluginPackagesSetOnASessionLoadInItsRunningWorker: --plugin on a
// session that exists replaces its packages: its running worker loads
// the new one, and keeps the one it had as it loaded it.
func TestPluginPackagesSetOnASessionLoadInItsRunningWorker(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(p.extraEnv, "AGENTD_WORKER_IDLE_GRACE=1h") // one worker for the whole test
	first := greetKit(t, p)
	second := writeKit(t, p, "second", map[string]string{
		".claude-plugin/plugin.json": `{"name":"second"}`,
		"commands/wave.md":           "Wave at $ARGUMENTS.",
	})
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--plugin", first))
	if res := p.commandsJSON(id); len(res.Packages) != 1 || res.Packages[0].Activations != 1 {
		t.Fatalf("before: %+v", res.Packages)
	}
	p.mustRun("run", "--session", id, "--plugin", first, "--plugin", second, "/wave the crowd")
	res := p.commandsJSON(id)
	if len(res.Packages) != 2 || res.Packages[0].Activations != 1 || res.Packages[1].Name != "second" || res.Packages[1].Activations != 1 {
		t.Fatalf("after: %+v", res.Packages)
	}
	if got := p.userMessages(id); len(got) != 1 || got[0] != "Wave at the crowd." {
		t.Fatalf("prompts %q", got)
	}
	var sess protocol.Session
	json.Unmarshal([]byte(p.mustRun("rename", id, "kept", "--json")), &sess)
	if len(sess.Plugins) != 2 || sess.Plugins[1] != second {
		t.Fatalf("the header's packages: %+v", sess.Plugins)
	}
}
