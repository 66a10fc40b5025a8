package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// Offline, a turn in a directory with an AGENTS.md gives the file to the
// model and counts its tokens: run and log show both, and the JSON of
// each carries them.
func TestRunAndLogShowTheInstructionFilesAndTheTurnsUsage(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	if err := os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Keep answers short.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := p.run("run", "--cwd", dir, "--approve", "all", "hello there")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	for name, text := range map[string]string{"run": out, "log": p.mustRun("log", id)} {
		if !strings.Contains(text, "· instructions: ") || !strings.Contains(text, "AGENTS.md") {
			t.Errorf("%s does not show the instruction file:\n%s", name, text)
		}
		if !strings.Contains(text, "── completed · ") || !strings.Contains(text, " tokens in, ") || !strings.Contains(text, "1 model call") {
			t.Errorf("%s does not show the turn's usage:\n%s", name, text)
		}
	}

	var start protocol.TurnStartData
	var end protocol.TurnEndData
	for _, line := range strings.Split(strings.TrimSpace(p.mustRun("log", "--json", id)), "\n") {
		var r protocol.TranscriptRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a record: %q", line)
		}
		switch r.Type {
		case protocol.RecordTurnStart:
			json.Unmarshal(r.Data, &start)
		case protocol.RecordTurnEnd:
			json.Unmarshal(r.Data, &end)
		}
	}
	if len(start.Instructions) != 1 || filepath.Base(start.Instructions[0].Path) != "AGENTS.md" || start.Instructions[0].Bytes != len("Keep answers short.\n") {
		t.Errorf("turn_start lists %+v, want the AGENTS.md", start.Instructions)
	}
	// The faux model has no price: tokens, and no cost.
	if u := end.Usage; u.ModelCalls != 1 || u.InputTokens == 0 || u.OutputTokens == 0 || u.CostUSD != 0 {
		t.Errorf("turn_end usage %+v, want one call's tokens and no cost", end.Usage)
	}

	out, errOut, code = p.run("run", "--session", id, "--json", "--approve", "all", "once more")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sawUsage bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var d protocol.SessionDelta
		if json.Unmarshal([]byte(line), &d) == nil && d.Event == protocol.EventRunEnd && d.Turn != nil && d.Turn.Usage.InputTokens > 0 {
			sawUsage = true
		}
	}
	if !sawUsage {
		t.Errorf("run --json has no run_end with the turn's usage:\n%s", out)
	}
}
