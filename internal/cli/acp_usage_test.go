package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// lastUsage returns the editor's last usage_update, as describe writes
// it, or "".
func (e *editor) lastUsage() string {
	seen := e.seen()
	for i := len(seen) - 1; i >= 0; i-- {
		if strings.HasPrefix(seen[i], "usage ") {
			return seen[i]
		}
	}
	return ""
}

// TestACPAnEditorSeesTheContextsUsageAndThePluginCommandsAndRunsOne: a
// session with a plugin package, on a model whose window is known, is
// loaded in an editor: its commands come as available_commands_update,
// with the argument hint; a prompt typed as /greet Ada runs the command's
// prompt; the turn's end sends usage_update, the tokens in context of the
// model's window, and a compaction what it leaves; an editor that loads or
// resumes the session gets the same.
func TestACPAnEditorSeesTheContextsUsageAndThePluginCommandsAndRunsOne(t *testing.T) {
	p := newSessionPlace(t)
	script := filepath.Join(t.TempDir(), "window.json")
	if err := os.WriteFile(script, []byte(`{"contextWindow": 8192}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p.extraEnv = append(p.extraEnv, "AGENTD_FAUX_SCRIPT="+script)
	cwd := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", cwd, "--plugin", greetKit(t, p)))
	ctx := agentdtest.Context(t)

	a := p.editor(allowOnce)
	if _, err := a.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(id), Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	poll.Until(t, "the session's commands", func() bool { return a.saw("commands greet:Greet someone:<name>") })
	if u := a.lastUsage(); u != "" {
		t.Fatalf("a session with no turn yet had usage %q", u)
	}

	resp, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(id), Prompt: []sdk.ContentBlock{sdk.TextBlock("/greet Ada")}})
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("session/prompt: %+v, %v", resp, err)
	}
	if got := p.userMessages(id); len(got) != 1 || strings.TrimSpace(got[0]) != "Greet Ada warmly, by name." {
		t.Fatalf("the session's prompts: %q", got)
	}
	poll.Until(t, "a usage_update after the turn", func() bool { return a.lastUsage() != "" })
	usage := a.lastUsage()
	if !strings.HasSuffix(usage, "/8192") || strings.HasPrefix(usage, "usage 0/") {
		t.Fatalf("usage after the turn: %q", usage)
	}
	// A prompt that names no command is the prompt itself.
	if _, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(id), Prompt: []sdk.ContentBlock{sdk.TextBlock("/nosuch thing")}}); err != nil {
		t.Fatalf("session/prompt: %v", err)
	}
	if got := p.userMessages(id); len(got) != 2 || got[1] != "/nosuch thing" {
		t.Fatalf("the session's prompts: %q", got)
	}
	poll.Until(t, "a usage_update after the second turn", func() bool { return a.lastUsage() != usage })
	usage = a.lastUsage()
	// A compaction between turns leaves a smaller context: the editor
	// following the session is told.
	p.mustRun("compact", id, "--keep", "1")
	poll.Until(t, "a usage_update after the compaction", func() bool { return a.lastUsage() != usage })
	compactions := ofType(p.logRecords(id), protocol.RecordCompaction)
	if len(compactions) != 1 {
		t.Fatalf("%d compaction records", len(compactions))
	}
	var cd protocol.CompactionData
	if err := json.Unmarshal(compactions[0].Data, &cd); err != nil {
		t.Fatal(err)
	}
	if after, want := a.lastUsage(), fmt.Sprintf("usage %d/8192", cd.TokensAfter); after != want {
		t.Fatalf("usage %q after the compaction, want %q", after, want)
	}
	usage = a.lastUsage()

	// Another editor loading the session gets the same usage with its
	// history; one resuming it gets it without.
	b := p.editor(allowOnce)
	if _, err := b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(id), Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	if got := b.lastUsage(); got != usage {
		t.Fatalf("session/load sent usage %q before its answer, want %q", got, usage)
	}
	c := p.editor(allowOnce)
	if _, err := c.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sdk.SessionId(id), Cwd: cwd}); err != nil {
		t.Fatalf("session/resume: %v", err)
	}
	poll.Until(t, "usage and commands on resume", func() bool {
		return c.lastUsage() == usage && c.saw("commands greet:")
	})
}
