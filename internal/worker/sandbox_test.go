package worker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/protocol"
)

// TestAShellOfTheSessionRunsInItsSandboxUnlessAskedWithout: a resource a
// client starts runs in the session's sandbox (workspace by default), and
// one started with sandbox full runs without it.
func TestAShellOfTheSessionRunsInItsSandboxUnlessAskedWithout(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	ctx := agentdtest.Context(t)
	outside := t.TempDir()
	for _, tc := range []struct {
		launch, sandbox, file string
		written               bool
	}{
		{"walled", "", "walled", false},
		{"free", protocol.SandboxFull, "free", true},
	} {
		res, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
			SessionID: "s1", LaunchID: tc.launch, Command: "echo x > " + filepath.Join(outside, tc.file), Sandbox: tc.sandbox,
		})
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, tc.launch+" to exit", func() bool {
			got, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: "s1"})
			if err != nil {
				return false
			}
			for _, g := range got.Resources {
				if g.Ref == res.Ref {
					return g.State == protocol.ResourceExited
				}
			}
			return false
		})
		if _, err := os.Stat(filepath.Join(outside, tc.file)); (err == nil) != tc.written {
			t.Fatalf("%s: written outside the session's directory: %v, want %v", tc.launch, err == nil, tc.written)
		}
	}
	if _, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: "s1", LaunchID: "bad", Command: "true", Sandbox: protocol.SandboxReadOnly,
	}); err == nil {
		t.Fatal("a start asking for sandbox read-only was taken: only full is chosen per start")
	}
}
