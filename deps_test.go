package agentd_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentd-dev/agentd"

// arrows holds every import of one agentd package by another that the
// design allows: package → the agentd packages it may import. A new
// arrow fails TestImportArrows until it is written here, so the shape of
// the system changes on purpose or not at all. The rules behind it:
// protocol imports nothing of agentd; the client only protocol, and
// starts no host (internal/activation does, for the agentd command); the
// worker serves its socket through server, never through the host; the
// host's session service never imports the worker it starts, and reaches
// worker processes only through the supervisor.
var arrows = map[string][]string{
	"protocol": {},
	"client":   {"protocol"},
	// the session stream's tests against a real agentd: test files alone
	"client/sessiontest": {},
	"cmd/agentd":         {"internal/cli"},

	// cold activation: starts a host with the command it is given and
	// waits for it through the public client's discovery; it never
	// imports the host. Only the agentd command, tests and benchmarks
	// start hosts, so only they import it.
	"internal/activation": {"client", "internal/fswatch", "internal/home", "internal/proc", "protocol"},
	// editors over the Agent Client Protocol: a client of the host like
	// every other, handed the way to reach it by the agentd command
	"internal/acp":             {"client", "protocol"},
	"internal/agent":           {"internal/llm", "internal/tools"},
	"internal/agentdtest":      {"client", "internal/agentdtest/poll", "internal/host", "internal/server", "protocol"},
	"internal/agentdtest/poll": {},
	"internal/atomicfile":      {},
	"internal/catalog":         {"internal/atomicfile", "protocol"},
	"internal/credentials":     {"internal/atomicfile", "internal/fswatch"},
	// waking a waiter when a file changes: activation and logs -f
	"internal/fswatch": {},
	"internal/fanout":  {},
	// the guests' grants, kept in the home as every file agentd keeps
	"internal/guest": {"internal/atomicfile", "protocol"},
	"internal/home":  {"internal/atomicfile", "protocol"},
	"internal/host":  {"internal/home", "internal/server", "protocol"},
	"internal/llm":   {},
	// MCP servers as the worker runs them: sandboxed like the session's
	// commands, listed among its resources, their tools the agent's
	"internal/mcp":  {"internal/atomicfile", "internal/llm", "internal/resource", "internal/sandbox", "internal/tools", "protocol"},
	"internal/proc": {},
	// plugin packages in Claude Code's layout: the format alone
	"internal/plugin":                {},
	"internal/provider":              {"internal/atomicfile", "internal/llm", "internal/redact"},
	"internal/provider/anthropic":    {"internal/llm", "internal/provider", "internal/redact"},
	"internal/provider/faux":         {"internal/llm", "internal/provider"},
	"internal/provider/openai":       {"internal/llm", "internal/provider", "internal/redact"},
	"internal/provider/providertest": {"internal/llm"},
	"internal/redact":                {},
	"internal/startenv":              {},
	// the sandbox of the agent's commands: it knows the modes' names, and
	// is imported by what starts commands (tools, resource), the worker
	// that says how (its policy) and the agentd command (its status)
	"internal/sandbox": {"internal/proc", "internal/sandbox/entry", "protocol"},
	// the re-exec itself: nothing of agentd, so that its init runs early
	"internal/sandbox/entry": {},
	// a command's output kept, logged and sent without the keys the
	// process holds
	"internal/resource": {"internal/atomicfile", "internal/proc", "internal/redact", "internal/sandbox", "protocol"},
	// the peer of a connection refused when it runs in the sandbox
	"internal/server": {"internal/home", "internal/proc", "internal/redact", "internal/transport", "protocol"},
	// the host's own connection to a session's worker, never the public client
	"internal/link": {"internal/transport", "protocol"},
	// why a session's worker ended written without following a link;
	// the guests' grants it decides access from, and the web listener it
	// starts for the owner
	// and the transcript a fork or a rewind copies into a new session;
	// the sessions' own MCP servers it records in the home
	"internal/sessions":   {"internal/atomicfile", "internal/catalog", "internal/fanout", "internal/fswatch", "internal/guest", "internal/home", "internal/link", "internal/mcp", "internal/plugin", "internal/server", "internal/supervisor", "internal/transcript", "internal/transport", "internal/web", "protocol"},
	"internal/supervisor": {"internal/home", "internal/link", "internal/proc", "protocol"},
	"internal/tools":      {"internal/atomicfile", "internal/llm", "internal/proc", "internal/sandbox", "protocol"},
	// its file opened without following a symbolic link
	"internal/transcript": {"internal/atomicfile", "protocol"},
	"internal/transport":  {"protocol"},
	// a prompt typed as /name args is a plugin package's command
	"internal/tui":     {"client", "internal/plugin", "protocol"},
	"internal/version": {},
	// the web listener hands the connections it authenticated to the
	// server, naming their principal; the grants prove guests' tokens;
	// it records itself and its logins in the home, as the home's other
	// files are written
	"internal/web": {"internal/atomicfile", "internal/guest", "internal/server", "protocol"},
	// the worker names the composition it serves and the host surface it
	// trusts as the link defines them, the two ends of one connection;
	// what it records and sends is redacted of the keys it holds; the
	// content of files before the agent changed them is kept as every
	// file agentd keeps
	"internal/worker": {"internal/agent", "internal/atomicfile", "internal/fanout", "internal/home", "internal/link", "internal/llm", "internal/mcp", "internal/plugin", "internal/proc", "internal/redact", "internal/resource", "internal/sandbox", "internal/server", "internal/tools", "internal/transcript", "internal/transport", "protocol"},
	// the host's log opened without following a symbolic link, as every
	// file agentd keeps in its own directories
	"internal/cli": {
		"client", "internal/acp", "internal/activation", "internal/atomicfile", "internal/fswatch", "internal/credentials", "internal/home", "internal/host", "internal/llm", "internal/mcp", "internal/proc", "internal/provider", "internal/provider/anthropic", "internal/provider/faux",
		"internal/plugin", "internal/provider/openai", "internal/redact", "internal/sandbox", "internal/sessions", "internal/startenv", "internal/tools", "internal/transcript",
		"internal/tui", "internal/version", "internal/worker", "protocol",
	},

	"bench/internal/asagentd": {"internal/cli", "internal/proc", "protocol"},
	"bench/internal/harness":  {},
	// the homes the benches run agentd's processes in
	"bench/internal/place":    {"bench/internal/asagentd", "client", "internal/activation", "protocol"},
	"bench/internal/procstat": {"internal/proc"},
	"bench/internal/table":    {},
	"bench/hostbench":         {"bench/internal/harness", "bench/internal/procstat", "bench/internal/table", "client", "internal/host", "protocol"},
	// a stopped stream's diagnosis asks the session's worker through the host's link
	"bench/sessionbench": {"bench/internal/harness", "bench/internal/procstat", "bench/internal/table", "client", "internal/activation", "internal/cli", "internal/home", "internal/link", "internal/proc", "internal/resource", "protocol"},
	// the sandbox's cost on a bash call, through the tool itself
	"bench/sandboxbench": {"bench/internal/table", "internal/sandbox", "internal/tools", "protocol"},
	// a session's plugin packages on its worker's start, beside none
	"bench/pluginbench": {"bench/internal/asagentd", "bench/internal/harness", "bench/internal/table", "client", "internal/activation", "internal/plugin", "protocol"},
	"bench/soak":        {"bench/internal/asagentd", "bench/internal/harness", "client", "internal/activation", "internal/home", "internal/proc", "protocol"},
	"bench/acpbench":    {"bench/internal/asagentd", "bench/internal/harness", "bench/internal/place", "bench/internal/table", "client", "protocol"},
	// a long session's worker, run as agentd worker runs it, on the offline model
	"bench/longbench": {"bench/internal/table", "internal/link", "internal/llm", "internal/provider", "internal/provider/faux", "internal/tools", "internal/worker", "protocol"},
	// an MCP tool's step through the agent loop, and first turns through agentd's processes
	"bench/mcpbench": {"bench/internal/asagentd", "bench/internal/harness", "bench/internal/place", "bench/internal/table", "client", "internal/mcp", "internal/provider/faux", "protocol"},
	// the MCP server mcpbench runs: the standard library alone
	"bench/mcpbench/rawserver": {},
	"bench/handoffbench":       {"bench/internal/asagentd", "bench/internal/harness", "bench/internal/procstat", "bench/internal/table", "client", "internal/activation", "internal/home", "internal/proc", "protocol"},
}

// TestImportArrows checks every package's imports of agentd (test files
// excluded) against arrows.
func TestImportArrows(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := map[string]bool{}
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue // the module's root holds only this test
		}
		seen[name] = true
		allowed, known := arrows[name]
		if !known {
			t.Errorf("package %s is not in the table of import arrows: add it, with what it may import", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if ok && !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s: an arrow the table does not allow", name, dep)
			}
		}
	}
	for name := range arrows {
		if !seen[name] {
			t.Errorf("the table of import arrows names %s, which is no package", name)
		}
	}
}
