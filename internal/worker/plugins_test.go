package worker_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

// toolNamesOf returns the names of the tools a recorded chat request
// offers.
func toolNamesOf(t *testing.T, req providertest.Request) []string {
	t.Helper()
	var body struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range body.Tools {
		names = append(names, tool.Function.Name)
	}
	return names
}

// A session's skills reach the model: each listed by name and
// description in the system prompt, with the skill tool offered; a
// session without skills is offered no skill tool. A package that does
// not load leaves the session going on without it.
func TestPluginSkillsAreOfferedToTheModel(t *testing.T) {
	base := t.TempDir()
	kit := filepath.Join(base, "kit")
	write(t, filepath.Join(kit, ".claude-plugin", "plugin.json"), `{"name":"kit"}`)
	write(t, filepath.Join(kit, "skills", "tabs", "SKILL.md"), "---\nname: tabs\ndescription: How this project indents\n---\nIndent with tabs.\n")
	gone := filepath.Join(base, "gone")

	srv := providertest.NewServer(t, providertest.Response{Body: chatReply})
	reg := provider.NewRegistry()
	reg.Register(openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL, HTTPClient: srv.HTTPClient()}))
	r := startWorker(t, worker.Config{
		Session:   protocol.Session{Cwd: base, Model: "openai/gpt-5", Plugins: []string{kit, gone}},
		Approval:  protocol.ApprovalAll,
		Providers: reg,
	})
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "hello")
	until(t, deltas, runEnd("t1"))
	req := srv.Requests()[0]
	if sys := systemOf(t, req); !strings.Contains(sys, "- tabs: How this project indents") || !strings.Contains(sys, "skill tool") {
		t.Errorf("the system prompt does not offer the skill:\n%s", sys)
	}
	if names := toolNamesOf(t, req); len(names) == 0 || names[len(names)-1] != worker.SkillTool {
		t.Errorf("tools offered: %q, want the skill tool last", names)
	}
	res, err := link.Call(agentdtest.Context(t), r.conn, protocol.OpSessionCommands, protocol.SessionRef{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Packages) != 2 || res.Packages[0].Activations != 1 || res.Packages[1].Dir != gone || !strings.Contains(res.Packages[1].Error, "no such file") || res.Packages[1].Activations != 0 {
		t.Errorf("packages %+v", res.Packages)
	}
	if len(res.Skills) != 1 || res.Skills[0].Name != "tabs" || res.Skills[0].Package != "kit" {
		t.Errorf("skills %+v", res.Skills)
	}
}
