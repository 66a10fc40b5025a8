package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
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
		if !strings.Contains(out, "* "+model+"\n") || strings.Count(out, "*") != 1 {
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
		if err := c.Request(ctx, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir(), Model: "faux/echo"}, s); err != nil {
			t.Fatal(err)
		}
	}
	var before protocol.ModelsListResult
	if err := c.Request(ctx, protocol.OpModelsList, nil, &before); err != nil {
		t.Fatal(err)
	}
	var sel protocol.ModelSelection
	if err := c.Request(ctx, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: a.SessionID, Model: "openai/llama3.1"}, &sel); err != nil {
		t.Fatal(err)
	}
	if sel.SessionID != a.SessionID || sel.Model != "openai/llama3.1" {
		t.Fatalf("selection %+v", sel)
	}
	model := func(id string) string {
		var s protocol.Session
		if err := c.Request(ctx, protocol.OpSessionGet, protocol.SessionRef{SessionID: id}, &s); err != nil {
			t.Fatal(err)
		}
		return s.Model
	}
	waitFor(t, "the selected session's model", func() bool { return model(a.SessionID) == "openai/llama3.1" })
	if got := model(b.SessionID); got != "faux/echo" {
		t.Errorf("the other session's model became %q", got)
	}
	var after protocol.ModelsListResult
	if err := c.Request(ctx, protocol.OpModelsList, nil, &after); err != nil {
		t.Fatal(err)
	}
	if *after.Default != *before.Default {
		t.Errorf("a session's selection moved the default for new sessions: %+v → %+v", before.Default, after.Default)
	}
	var s protocol.Session
	if err := c.Request(ctx, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Model == "openai/llama3.1" {
		t.Errorf("a new session got the other session's model")
	}
}
