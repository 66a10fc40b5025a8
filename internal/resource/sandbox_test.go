package resource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// TestShellRunsAndPTYsRunInTheSessionsSandboxUnlessAskedWithout: a
// read-only session's shell run and PTY cannot write in its directory;
// a start that asks for no sandbox can.
func TestShellRunsAndPTYsRunInTheSessionsSandboxUnlessAskedWithout(t *testing.T) {
	pol := &sandbox.Policy{Mode: protocol.SandboxReadOnly, Tmp: t.TempDir()}
	t.Cleanup(pol.Close)
	m, s, dir := newManager(t, func(c *Config) { c.Sandbox = pol })
	run := start(t, m, StartInput{LaunchID: "l1", Command: "echo x > run-file; echo run ended"})
	s.exited(t, run.Ref)
	pty := start(t, m, StartInput{LaunchID: "l2", Command: "echo x > pty-file; echo pty ended; sleep 1000", PTY: true})
	s.printed(t, pty.Ref, "pty ended")
	for ref, file := range map[string]string{run.Ref: "run-file", pty.Ref: "pty-file"} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			t.Fatalf("%s wrote %s in a read-only session", ref, file)
		}
	}
	poll.Until(t, "the shell run's output shows the denial", func() bool {
		out, _, err := m.Output(run.Ref)
		return err == nil && strings.Contains(string(out), "Permission denied") && strings.Contains(string(out), "run ended")
	})
	if text, err := m.ScreenText(pty.Ref); err != nil || !strings.Contains(text, "Permission denied") {
		t.Fatalf("the PTY's screen %q, %v: want the denial", text, err)
	}

	free := start(t, m, StartInput{LaunchID: "l3", Command: "echo x > free-file", Unsandboxed: true})
	if end := s.exited(t, free.Ref); end.ExitCode == nil || *end.ExitCode != 0 {
		t.Fatalf("the unsandboxed run ended %+v", end)
	}
	if _, err := os.Stat(filepath.Join(dir, "free-file")); err != nil {
		t.Fatalf("the unsandboxed run did not write: %v", err)
	}
}
