package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
	"github.com/agentd-dev/agentd/protocol"
)

func TestModelsThatCannotRunAreRefusedWithTheReasonAndTheFix(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(p.extraEnv, noKeys...)
	dir := p.workDir()
	unlisted := []string{`faux has no model "nosuch"`, "agentd models"}
	noKey := []string{"anthropic is not configured", "agentd auth set anthropic", "ANTHROPIC_API_KEY"}
	// A model named as an operand (models select) is a usage error.
	cases := []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"run", "--cwd", dir, "--model", "faux/nosuch", "hi"}, 1, unlisted},
		{[]string{"new", "--cwd", dir, "--model", "faux/nosuch"}, 1, unlisted},
		{[]string{"models", "select", "faux/nosuch"}, 2, unlisted},
		{[]string{"models", "select", "nope"}, 2, []string{`unknown provider "nope"`, "faux"}},
		{[]string{"models", "select", "faux"}, 2, []string{"faux/echo"}},
		{[]string{"run", "--cwd", dir, "--model", "anthropic/claude-opus-4-6", "hi"}, 1, noKey},
		{[]string{"models", "select", "anthropic/claude-opus-4-6"}, 2, noKey},
		{[]string{"new", "--cwd", dir, "--model", "openai/gpt-5"}, 1, []string{"openai is not configured", "agentd auth set openai", "OPENAI_BASE_URL"}},
	}
	for _, c := range cases {
		_, errOut, code := p.run(c.args...)
		if code != c.code {
			t.Errorf("agentd %v: exit %d, want %d: %s", c.args, code, c.code, errOut)
		}
		for _, want := range c.says {
			if !strings.Contains(errOut, want) {
				t.Errorf("agentd %v: %q does not say %q", c.args, errOut, want)
			}
		}
	}
	var sessions []protocol.Session
	json.Unmarshal([]byte(p.mustRun("ls", "--json")), &sessions)
	if len(sessions) != 0 {
		t.Errorf("refused starts left sessions behind: %+v", sessions)
	}
	if out := p.mustRun("models"); !strings.Contains(out, "* faux/echo") {
		t.Errorf("a refused selection moved the default:\n%s", out)
	}
}

func TestACompatibleServerAcceptsAnyModelAndTheDefaultIsMarkedAfterEachSelect(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "OPENAI_BASE_URL=http://127.0.0.1:9/v1")
	for _, model := range []string{"openai/llama3.1", "faux/echo", "openai/gpt-5"} {
		p.mustRun("models", "select", model)
		out := p.mustRun("models")
		if !regexp.MustCompile(`(?m)^\* `+regexp.QuoteMeta(model)+`\s`).MatchString(out) || strings.Count(out, "*") != 1 {
			t.Fatalf("after selecting %s, models shows:\n%s", model, out)
		}
	}
}

func TestSelectingASessionsModelChangesThatSessionAlone(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "OPENAI_BASE_URL=http://127.0.0.1:9/v1")
	c := p.open(t)
	ctx := agentdtest.Context(t)
	var a, b protocol.Session
	for _, s := range []*protocol.Session{&a, &b} {
		created, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir(), Model: "faux/echo"})
		if err != nil {
			t.Fatal(err)
		}
		*s = created
	}
	before, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := client.Call(ctx, c, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: a.SessionID, Model: "openai/llama3.1"})
	if err != nil {
		t.Fatal(err)
	}
	if sel.SessionID != a.SessionID || sel.Model != "openai/llama3.1" {
		t.Fatalf("selection %+v", sel)
	}
	model := func(id string) string {
		s, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		return s.Model
	}
	poll.Until(t, "the selected session's model", func() bool { return model(a.SessionID) == "openai/llama3.1" })
	if got := model(b.SessionID); got != "faux/echo" {
		t.Errorf("the other session's model became %q", got)
	}
	after, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if *after.Default != *before.Default {
		t.Errorf("a session's selection moved the default for new sessions: %+v → %+v", before.Default, after.Default)
	}
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir()})
	if err != nil {
		t.Fatal(err)
	}
	if s.Model == "openai/llama3.1" {
		t.Errorf("a new session got the other session's model")
	}
}

// attachedModel attaches a client to session id, reads the session's model
// from the worker's state the subscription opens with, and detaches. It
// returns the model and the worker's pid.
func attachedModel(t *testing.T, p *place, id string) (string, int) {
	t.Helper()
	c := p.open(t)
	defer c.Close()
	return watchModels(t, c, id).get().Model, workerPID(t, p, id)
}

// modelCalled is the model the one request fake received asked for.
func modelCalled(t *testing.T, fake *providertest.Server) string {
	t.Helper()
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model endpoint got %d requests, want 1", len(reqs))
	}
	m, _ := reqs[0].JSON(t)["model"].(string)
	return m
}

func TestPreservesAnExistingSessionModelWhenTheServerDefaultChanges(t *testing.T) {
	p := newSessionPlace(t)
	fake := fakeAnthropic(t, 1)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	dir := p.workDir()
	const opus = "anthropic/claude-opus-4-6"

	p.startHost("--default-model", opus)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	m, pid := attachedModel(t, p, id)
	if m != opus {
		t.Fatalf("a session of a host defaulting to %s has model %q", opus, m)
	}
	waitProcessGone(t, pid)
	p.mustRun("shutdown")

	// The next host of the home has another default: new sessions get it,
	// the existing one keeps its model, and its worker calls that model.
	p.startHost("--default-model", "faux/echo")
	var fresh protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("new", "--json", "--cwd", dir)), &fresh); err != nil || fresh.Model != "faux/echo" {
		t.Fatalf("a new session on the second host: %+v %v, want faux/echo", fresh, err)
	}
	if m, _ := attachedModel(t, p, id); m != opus {
		t.Fatalf("the existing session's worker has model %q after the default changed, want %s", m, opus)
	}
	if out := p.mustRun("run", "--session", id, "hi"); !strings.Contains(out, "Hello, world.") {
		t.Fatalf("run: %s", out)
	}
	if m := modelCalled(t, fake); m != "claude-opus-4-6" {
		t.Fatalf("the session's turn called model %q, want claude-opus-4-6", m)
	}
}

func TestUsesTheMostRecentlySelectedModelForANewSession(t *testing.T) {
	p := newSessionPlace(t)
	fake := fakeAnthropic(t, 1)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	dir := p.workDir()
	ctx := agentdtest.Context(t)
	c := p.open(t)
	first, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	if first.Model != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("the first session's model %q, want the host's default", first.Model)
	}
	watchModels(t, c, first.SessionID)
	pid := workerPID(t, p, first.SessionID)
	// One client selects twice for new sessions, while attached to one.
	for _, m := range []string{"anthropic/claude-haiku-4-5", "anthropic/claude-opus-4-6"} {
		if _, err := client.Call(ctx, c, protocol.OpModelsSelect, protocol.ModelsSelectInput{Model: m}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	waitProcessGone(t, pid)

	// Another client's next session gets the model selected last.
	var second protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("new", "--json", "--cwd", dir)), &second); err != nil {
		t.Fatal(err)
	}
	if second.Model != "anthropic/claude-opus-4-6" {
		t.Fatalf("the next session's model %q, want the one selected last, anthropic/claude-opus-4-6", second.Model)
	}
	if m, _ := attachedModel(t, p, second.SessionID); m != "anthropic/claude-opus-4-6" {
		t.Fatalf("the next session's worker has model %q", m)
	}
	if m, _ := attachedModel(t, p, first.SessionID); m != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("selecting for new sessions changed an existing one's model to %q", m)
	}
	if out := p.mustRun("run", "--session", second.SessionID, "hi"); !strings.Contains(out, "Hello, world.") {
		t.Fatalf("run: %s", out)
	}
	if m := modelCalled(t, fake); m != "claude-opus-4-6" {
		t.Fatalf("the next session's turn called model %q, want claude-opus-4-6", m)
	}
}

func TestModelsShowsAGatewaysListingAndAnyNameItServesRuns(t *testing.T) {
	p := newSessionPlace(t)
	fake := fakeAnthropic(t, 1)
	fake.SetModels(0, providertest.Model{ID: "gateway-sonnet", MaxInputTokens: 300_000}, providertest.Model{ID: "claude-sonnet-4-5"})
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	out := p.mustRun("models")
	for _, line := range []string{`anthropic/gateway-sonnet\s+300k\s+listed by anthropic`, `anthropic/claude-sonnet-4-5\s+200k\s+listed by anthropic`, `faux/echo\s+\S+\s+built in`} {
		if !regexp.MustCompile(`(?m)^. ` + line + `$`).MatchString(out) {
			t.Errorf("models does not show %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "claude-opus-4-6") {
		t.Errorf("models shows a built-in model the gateway does not list:\n%s", out)
	}
	// A name the gateway does not list still goes to it: it decides.
	if out := p.mustRun("run", "--cwd", p.workDir(), "--model", "anthropic/team/claude-proxy", "hi"); !strings.Contains(out, "Hello, world.") {
		t.Fatalf("run: %s", out)
	}
	if m := modelCalled(t, fake); m != "team/claude-proxy" {
		t.Fatalf("the turn called model %q, want team/claude-proxy", m)
	}
}
