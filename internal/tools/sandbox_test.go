package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// TestABashCallOfASandboxedSessionShowsTheDenialInItsOutput: in
// workspace mode a write outside the session's directory is refused, and
// the shell's words for it are what the model reads; the write inside
// and the rest of the command go on.
func TestABashCallOfASandboxedSessionShowsTheDenialInItsOutput(t *testing.T) {
	t.Parallel()
	work, outside, home := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "credentials.json"), []byte("sk-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := &sandbox.Policy{Mode: protocol.SandboxWorkspace, Workspace: []string{work}, Tmp: t.TempDir(), Hidden: []string{home}}
	t.Cleanup(pol.Close)
	env := &Env{Cwd: work, Sandbox: pol}
	out := mustOK(t, bash(t, env, "echo in > inside; echo out > "+filepath.Join(outside, "f")+"; cat "+filepath.Join(home, "credentials.json")+"; echo done", 0))
	if strings.Count(out, "Permission denied") != 2 || !strings.Contains(out, "done") || strings.Contains(out, "sk-secret") {
		t.Fatalf("the call answered %q", out)
	}
	if got := readFile(t, filepath.Join(work, "inside")); got != "in\n" {
		t.Fatalf("inside the workspace: %q", got)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Fatal("the command wrote outside the workspace")
	}
}
