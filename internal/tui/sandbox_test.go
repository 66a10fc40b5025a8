package tui

import (
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// TestTheHeaderSaysHowTheSessionsCommandsRun: the first line names the
// session's sandbox, and says when there is none.
func TestTheHeaderSaysHowTheSessionsCommandsRun(t *testing.T) {
	for _, tc := range []struct {
		sandbox, network, want string
	}{
		{protocol.SandboxWorkspace, protocol.NetworkOn, "sandbox workspace ·"},
		{protocol.SandboxReadOnly, protocol.NetworkOff, "sandbox read-only, no network ·"},
		{protocol.SandboxFull, protocol.NetworkOn, "no sandbox ·"},
	} {
		m := screenModel(t)
		m.apply(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: &protocol.Session{
			SessionID: "s-1", Title: "work", Model: "faux/echo", Status: protocol.SessionIdle, Sandbox: tc.sandbox, Network: tc.network,
		}})
		first, _, _ := strings.Cut(m.screen(), "\n")
		if !strings.Contains(first, "faux/echo · "+tc.want) {
			t.Errorf("sandbox %s, network %s: the header is %q, want it to say %q", tc.sandbox, tc.network, first, tc.want)
		}
	}
	if first, _, _ := strings.Cut(screenModel(t).screen(), "\n"); strings.Contains(first, "sandbox") {
		t.Errorf("a session from a host before sandboxes: the header is %q, want no sandbox named", first)
	}
}
