package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/credentials"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
	"github.com/agentd-dev/agentd/protocol"
)

// noKeys leaves the machine's own keys out of the agentd processes a test
// runs.
var noKeys = []string{"ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "ANTHROPIC_BASE_URL=", "OPENAI_BASE_URL="}

// runIn runs agentd with stdin and returns stdout, stderr and the exit code.
func (p *place) runStdin(stdin string, args ...string) (string, string, int) {
	p.t.Helper()
	cmd := p.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		p.t.Fatalf("agentd %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// fakeAnthropic is a local endpoint that answers each model call with the
// recorded stream of a text reply ("Hello, world.").
func fakeAnthropic(t *testing.T, calls int) *providertest.Server {
	body, err := os.ReadFile(filepath.Join("..", "provider", "anthropic", "testdata", "text.sse"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []providertest.Response
	for range calls {
		rs = append(rs, providertest.Response{Body: string(body)})
	}
	return providertest.NewServer(t, rs...)
}

func TestAKeyStoredWithAuthSetIsUsedByTheRunningHostWithoutARestart(t *testing.T) {
	p := newSessionPlace(t)
	fake := fakeAnthropic(t, 1)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_BASE_URL="+fake.URL)
	dir := p.workDir()
	before := p.statusJSON() // a host started without keys
	const model = "anthropic/claude-sonnet-4-5"

	_, errOut, code := p.run("run", "--cwd", dir, "--model", model, "hi")
	if code != 1 || !strings.Contains(errOut, "agentd auth set anthropic") {
		t.Fatalf("a run before any key: exit %d: %s", code, errOut)
	}
	if out := p.mustRun("models"); !strings.Contains(out, model) || !strings.Contains(out, "cannot run: anthropic has no key") {
		t.Fatalf("models does not say the model cannot run:\n%s", out)
	}

	const key = "sk-ant-stored-Zq81xLmNoPqrStUv"
	if out, errOut, code := p.runStdin(key+"\n", "auth", "set", "anthropic"); code != 0 || !strings.Contains(out, "stored the anthropic key") {
		t.Fatalf("auth set: exit %d: %s%s", code, out, errOut)
	}
	fi, err := os.Stat(credentials.Path(p.home))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
	if out := p.mustRun("auth", "ls"); !strings.Contains(out, "anthropic") || !strings.Contains(out, "credentials file") {
		t.Fatalf("auth ls:\n%s", out)
	}
	if out := p.mustRun("status"); !strings.Contains(out, "anthropic (key from the credentials file)") || !strings.Contains(out, "not configured: openai") {
		t.Fatalf("status does not show the providers:\n%s", out)
	}

	out, errOut, code := p.run("run", "--cwd", dir, "--model", model, "hi")
	if code != 0 || !strings.Contains(out, "Hello, world.") {
		t.Fatalf("a run after auth set: exit %d:\n%s\n%s", code, out, errOut)
	}
	reqs := fake.Requests()
	// The key is sent in x-api-key.
	if len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != key {
		t.Fatalf("the provider got %d requests, the first with the stored key: %v", len(reqs), len(reqs) == 1 && reqs[0].Header.Get("X-Api-Key") == key)
	}
	if after := p.statusJSON(); after.PID != before.PID || after.HostEpoch != before.HostEpoch {
		t.Fatalf("the host was replaced: pid %d → %d", before.PID, after.PID)
	}

	// The key shows nowhere a person or a program reads.
	shown := p.mustRun("status", "--json") + p.mustRun("models", "--json") + p.mustRun("auth", "ls", "--json") + p.mustRun("auth", "ls") + p.mustRun("log", sessionIDFrom(t, errOut))
	hostLog, _ := os.ReadFile(filepath.Join(p.home, activation.LogFileName))
	for what, text := range map[string]string{"output": shown, "host.log": string(hostLog)} {
		if strings.Contains(text, key) || strings.Contains(text, key[len(key)-8:]) {
			t.Errorf("the %s holds the key", what)
		}
	}
	var providers []protocol.ProviderStatus
	if err := json.Unmarshal([]byte(p.mustRun("auth", "ls", "--json")), &providers); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ps := range providers {
		if ps.Name == "anthropic" {
			found = ps.Configured && ps.KeySource == protocol.KeySourceFile
		}
	}
	if !found {
		t.Errorf("auth ls --json: %+v", providers)
	}

	// Removed, the key is no longer used.
	if out := p.mustRun("auth", "rm", "anthropic"); !strings.Contains(out, "removed") {
		t.Fatalf("auth rm: %s", out)
	}
	if _, errOut, code := p.run("run", "--cwd", dir, "--model", model, "hi"); code != 1 || !strings.Contains(errOut, "anthropic is not configured") {
		t.Fatalf("a run after auth rm: exit %d: %s", code, errOut)
	}
}

func TestAuthSetOnATerminalAsksWithoutEcho(t *testing.T) {
	p := newPlace(t)
	s := p.screen(t, "auth", "set", "openai")
	s.waitText("openai API key (not shown):")
	const key = "sk-typed-0123456789abcdef"
	s.typeKeys(key + "\r")
	if err := s.waitExit(); err != nil {
		t.Fatalf("auth set: %v\n%s", err, s.text())
	}
	if strings.Contains(s.text(), key) || !strings.Contains(s.text(), "stored the openai key") {
		t.Fatalf("the screen:\n%s", s.text())
	}
	f, err := credentials.Read(p.home)
	if err != nil || f.Keys["openai"] != key {
		t.Fatalf("stored %v, %v", f.Providers(), err)
	}
}

func TestAuthRefusesBadInputAsUsage(t *testing.T) {
	p := newPlace(t)
	cases := []struct {
		stdin string
		args  []string
		says  string
	}{
		{"sk-0123456789abc", []string{"auth", "set", "nosuch"}, `"nosuch" is not a provider that takes a key`},
		{"sk-0123456789abc", []string{"auth", "set", "faux"}, "anthropic, openai"},
		{"", []string{"auth", "set", "openai"}, "no openai key on standard input"},
		{"sk-with space", []string{"auth", "set", "openai"}, "spaces or control characters"},
		{"", []string{"auth", "set"}, "PROVIDER"},
		{"", []string{"auth", "rm", "nosuch"}, "nosuch"},
	}
	for _, c := range cases {
		_, errOut, code := p.runStdin(c.stdin, c.args...)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %v: exit %d %q; want exit 2 saying %q", c.args, code, errOut, c.says)
		}
	}
	if _, err := os.Stat(credentials.Path(p.home)); err == nil {
		t.Errorf("a refused key was stored")
	}
}

func TestKeysDoNotReachTheAgentsTools(t *testing.T) {
	p := newSessionPlace(t)
	const envKey, storedKey = "sk-ant-env-Hq72bWvXyZaBcDeF", "sk-stored-Kk29fJqLmNoPqRsT"
	// The stored key is there before the host starts; a variable holding
	// a key's value under another name goes too.
	if _, errOut, code := p.runStdin(storedKey, "auth", "set", "openai"); code != 0 {
		t.Fatalf("auth set: %s", errOut)
	}
	// PLAIN_VAR reaches the commands because AGENTD_TOOL_ENV names it;
	// COPY_OF_KEY, named too, does not, since it holds a key; UNLISTED is
	// named nowhere.
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY="+envKey, "COPY_OF_KEY="+storedKey, "PLAIN_VAR=visible", "UNLISTED=hidden",
		"AGENTD_TOOL_ENV=PLAIN_VAR,COPY_OF_KEY")
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "faux/echo", "--approve", "all",
		"run `echo \"A[$ANTHROPIC_API_KEY] O[$OPENAI_API_KEY] C[$COPY_OF_KEY] P[$PLAIN_VAR] U[$UNLISTED]\"`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "A[] O[] C[] P[visible] U[]") {
		t.Fatalf("the command saw keys, or not the variables named for it:\n%s", out)
	}
	id := sessionIDFrom(t, errOut)

	// Nor a shell run a client starts in the session.
	c := p.open(t)
	marker := filepath.Join(p.workDir(), "env.txt")
	start := protocol.ResourceStartInput{SessionID: id, LaunchID: "l1",
		Command: `echo "A[$ANTHROPIC_API_KEY] O[$OPENAI_API_KEY] C[$COPY_OF_KEY] P[$PLAIN_VAR] U[$UNLISTED]" > ` + marker}
	if _, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceStart, start); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	poll.Until(t, "the shell run's line", func() bool {
		seen, _ = os.ReadFile(marker)
		return bytes.HasSuffix(seen, []byte("\n"))
	})
	if string(seen) != "A[] O[] C[] P[visible] U[]\n" {
		t.Fatalf("a shell run saw keys, or not the rest of the environment: %q", seen)
	}

	transcript := p.mustRun("log", id)
	hostLog, _ := os.ReadFile(filepath.Join(p.home, activation.LogFileName))
	for _, key := range []string{envKey, storedKey} {
		if strings.Contains(out+transcript+string(hostLog), key) {
			t.Errorf("a key reached the output, the transcript or the log")
		}
	}
}

func TestAKeyInTheShellThatTheRunningHostLacksIsNamedWithBothFixes(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(p.extraEnv, noKeys...)
	p.mustRun("status") // the host starts without keys
	p.extraEnv = append(p.extraEnv, "OPENAI_API_KEY=sk-shell-0123456789abcdef")
	_, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "openai/gpt-4.1", "hi")
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"OPENAI_API_KEY is set here", "running host started without it", "agentd auth set openai", "agentd shutdown"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the error does not say %q: %s", want, errOut)
		}
	}
	if out := p.mustRun("auth", "ls"); !strings.Contains(out, "OPENAI_API_KEY is set here, not in the running host") {
		t.Errorf("auth ls:\n%s", out)
	}
}
