package cli_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestTheStartRunsNoTmux: an agentd command on a terminal inside tmux
// starts no tmux process. lipgloss detects the terminal's colours as it
// initialises, and inside tmux that runs `tmux info`; internal/startenv
// hides TMUX from it. A tmux of the test's own, first on PATH, records
// any call.
func TestTheStartRunsNoTmux(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	if err := os.WriteFile(filepath.Join(dir, "tmux"), []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "version")
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "TMUX", "TERM", "COLORTERM", "NO_COLOR", "CLICOLOR_FORCE", "PATH":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envAsCLI+"=1", "TMUX="+filepath.Join(dir, "server")+",1,0", "TERM=xterm-256color",
		"PATH="+dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	tty, err := pty.Start(cmd) // standard output a terminal, as a person's
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(tty) // ends with EIO once the command has exited
	tty.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentd version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "agentd") {
		t.Fatalf("agentd version printed %q", out)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("agentd version, started on a terminal inside tmux, ran tmux: %q", b)
	}
}
