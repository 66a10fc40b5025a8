package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
// package without it being passed again: its worker loads it, once, and
// its command runs.
func TestPluginPackagesPassedToAColdHostComeBackOnItsNextGeneration(t *testing.T) {
	p := newSessionPlace(t)
	p.hostID = "00000000-0000-4000-8000-000000000001"
	p.extraEnv = append(p.extraEnv, "AGENTD_IDLE_GRACE=200ms")
	kit := greetKit(t, p)
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
// with two packages; through the host a client lists both and runs a
// command of each, and the model loads a skill of each; the session's
// one worker loaded each package once, however many calls it served.
func TestSeveralPluginPackagesLoadSideBySideEachOncePerWorker(t *testing.T) {
	p := newSessionPlace(t)
	first := greetKit(t, p)
	second := writeKit(t, p, "second", map[string]string{
		".claude-plugin/plugin.json": `{"name":"second-session-plugin","version":"2.0.0"}`,
		"commands/read.md":           "Read the notes of ${CLAUDE_PLUGIN_ROOT} about $ARGUMENTS.",
		"commands/greet.md":          "The second package's greeting for $ARGUMENTS.",
		"skills/notes/SKILL.md":      "---\nname: notes\ndescription: \"Where the notes are\"\n---\nThe notes are second.\n",
	})
	writeScript(t, p, `{"replies":[
		{"steps":[{"tool":"skill","arguments":{"name":"manners"},"id":"call-1"}]},
		{"steps":[{"tool":"skill","arguments":{"name":"notes"},"id":"call-2"}]},
		{"steps":[{"text":"loaded both"}]},
		{"steps":[{"text":"read"}]},
		{"steps":[{"text":"greeted"}]}
	]}`)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--plugin", first, "--plugin", second))

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
	want := []string{"get ready", "Read the notes of " + second + " about the build.", "Greet Ada warmly, by name.\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("prompts %q, want %q", got, want)
	}
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
