package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// TestBareAgentdAttachesToTheDirectorysLatestSessionOrStartsOne: agentd
// with no command, on a terminal, starts a session of the directory and
// attaches to it, and later attaches to the directory's latest session,
// with no picker; off a terminal it prints the help.
func TestBareAgentdAttachesToTheDirectorysLatestSessionOrStartsOne(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	out, _, code := p.runIn(dir)
	if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "Available Commands:") {
		t.Fatalf("off a terminal: exit %d\n%s", code, out)
	}
	if n := sessionCount(t, p); n != 0 {
		t.Fatalf("off a terminal, bare agentd made %d sessions", n)
	}
	s := p.screenOf(t, p.commandIn(dir))
	text := s.waitText("agentd · ")
	id := regexp.MustCompile(`agentd · (\S+)`).FindStringSubmatch(text)[1]
	s.typeKeys("\x1c")
	s.waitExit()
	var listed []protocol.Session
	json.Unmarshal([]byte(p.mustRun("ls", "--json")), &listed)
	if len(listed) != 1 || listed[0].SessionID != id || listed[0].Cwd != dir {
		t.Fatalf("sessions %+v, attached to %s", listed, id)
	}
	later := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	p.mustRun("run", "--session", later, "--approve", "all", "hello")
	s = p.screenOf(t, p.commandIn(dir))
	s.waitText("agentd · " + later)
	s.typeKeys("\x1c")
	s.waitExit()
}
