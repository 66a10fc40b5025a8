package cli_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/cli"
	"github.com/agentd-dev/agentd/internal/provider/anthropic"
	"github.com/agentd-dev/agentd/internal/provider/openai"
)

// buildAgentd builds the agentd command as path, as it is installed
// (CGO_ENABLED=0), with the build tags given.
func buildAgentd(t *testing.T, path string, tags ...string) {
	t.Helper()
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "github.com/agentd-dev/agentd/cmd/agentd")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
}

// The client build links none of the daemon's packages.
func TestTheClientBuildLinksNeitherHostNorWorkerNorTheirSDKs(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-tags", "agentd_client", "github.com/agentd-dev/agentd/cmd/agentd")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		linked[p] = true
	}
	for _, p := range []string{
		"github.com/agentd-dev/agentd/internal/host", "github.com/agentd-dev/agentd/internal/sessions",
		"github.com/agentd-dev/agentd/internal/worker", "github.com/agentd-dev/agentd/internal/tools",
		"github.com/agentd-dev/agentd/internal/mcp", "github.com/agentd-dev/agentd/internal/acp",
		"github.com/agentd-dev/agentd/internal/provider", "github.com/modelcontextprotocol/go-sdk/mcp",
		"github.com/coder/acp-go-sdk", "net/http",
	} {
		if linked[p] {
			t.Errorf("the client build links %s", p)
		}
	}
	if !linked["github.com/agentd-dev/agentd/internal/tui"] {
		t.Error("the client build does not link the terminal UI: is the tag still honoured?")
	}
}

// The client build starts its hosts from the whole executable beside it,
// agentd-host, and runs the commands it leaves out (mcp, here) there; with
// no agentd-host beside it, a command that needs a host says what is
// missing and how to build it.
func TestTheClientBuildRunsItsHostsAndDaemonCommandsThroughTheWholeExecutable(t *testing.T) {
	dir := t.TempDir()
	client, whole := filepath.Join(dir, "agentd"), filepath.Join(dir, "agentd-host")
	buildAgentd(t, client, "agentd_client")

	p := newSessionPlace(t)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(client, args...)
		cmd.Env = p.env()
		return p.runCommand(cmd)
	}
	if _, errOut, code := run("new", "--cwd", p.workDir()); code == 0 || !strings.Contains(errOut, "agentd-host") || !strings.Contains(errOut, "go build -o "+whole) {
		t.Fatalf("the client build without agentd-host: exit %d: %s", code, errOut)
	}

	buildAgentd(t, whole)
	out, errOut, code := run("new", "--cwd", p.workDir())
	if code != 0 {
		t.Fatalf("agentd new: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	st := p.statusJSON()
	exe, err := os.Readlink("/proc/" + strconv.Itoa(st.PID) + "/exe")
	if err != nil || exe != whole {
		t.Fatalf("the host runs %q (%v), want %s", exe, err, whole)
	}
	if out, errOut, code := run("ls"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("agentd ls: exit %d: %s%s", code, out, errOut)
	}
	want := p.mustRun("mcp", "ls", p.workDir())
	if out, errOut, code := run("mcp", "ls", p.workDir()); code != 0 || out != want {
		t.Fatalf("agentd mcp ls through the client build: exit %d: %q, want %q (%s)", code, out, want, errOut)
	}
}

// The client build names the providers' keys as the providers do.
func TestTheKeysTheClientBuildNamesAreTheProviders(t *testing.T) {
	want := map[string]string{anthropic.Name: anthropic.APIKeyEnv, openai.Name: openai.APIKeyEnv}
	if got := cli.KeyEnvs(); !maps.Equal(got, want) {
		t.Fatalf("keys %v, want the providers' %v", got, want)
	}
}
