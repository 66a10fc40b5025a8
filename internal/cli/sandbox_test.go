package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnAgentsBashCallInASandboxedSessionShowsTheDenial: through a real
// turn (the faux model calls bash), a workspace session's command cannot
// write outside its directory nor read agentd's home or runtime
// directory, and the tool's output shows the shell's denial; the same
// command in a session of sandbox full runs. ls shows each session's
// sandbox, status whether the kernel can sandbox.
func TestAnAgentsBashCallInASandboxedSessionShowsTheDenial(t *testing.T) {
	p := newSessionPlace(t)
	work := p.workDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "made-by-agent")
	// The host's registration sits in the runtime directory, the session
	// headers in the home.
	if status := p.mustRun("status"); !strings.Contains(status, "Landlock ABI") {
		t.Fatalf("status does not say the kernel can sandbox:\n%s", status)
	}
	probe := "run `echo in > inside; echo out > " + target + "; cat " + p.home + "/sessions/*/header.json; ls " + p.rundir + "; echo probe done`"
	out, errOut, code := p.run("run", "--cwd", work, "--approve", "all", probe)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	if strings.Count(out, "Permission denied") < 3 || !strings.Contains(out, "probe done") || strings.Contains(out, `"schemaVersion"`) {
		t.Fatalf("the tool's output does not show three denials:\n%s", out)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("a workspace session's command wrote outside its directory")
	}
	if b, err := os.ReadFile(filepath.Join(work, "inside")); err != nil || string(b) != "in\n" {
		t.Fatalf("the write inside the workspace: %q, %v", b, err)
	}

	// Run again by a person's choice, without a sandbox: it is said, and
	// the command does what it was refused.
	out, errOut, code = p.run("run", "--cwd", work, "--approve", "all", "--sandbox", "full", "run `echo out > "+target+"`")
	if code != 0 || !strings.Contains(errOut, "WITHOUT A SANDBOX") {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "out\n" {
		t.Fatalf("the unsandboxed write: %q, %v", b, err)
	}

	out, errOut, code = p.run("run", "--cwd", work, "--approve", "all", "--sandbox", "read-only", "--network", "off", "run `echo x > ro-file`")
	if code != 0 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	ls := p.mustRun("ls")
	for _, want := range []string{"SANDBOX", "workspace", "none (full)", "read-only, no network"} {
		if !strings.Contains(ls, want) {
			t.Fatalf("ls lacks %q:\n%s", want, ls)
		}
	}
}

func TestABadSandboxOrNetworkFlagIsAUsageErrorNamingIt(t *testing.T) {
	p := newPlace(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"run", "--sandbox", "none", "hi"}, "--sandbox"},
		{[]string{"new", "--network", "maybe"}, "--network"},
		{[]string{"run", "--sandbox", "full", "--network", "off", "hi"}, "--network"},
		{[]string{"run", "--session", "abc", "--sandbox", "read-only", "hi"}, "a session keeps its own"},
	} {
		_, errOut, code := p.run(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.says) {
			t.Errorf("agentd %v: exit %d, %q; want a usage error naming %s", tc.args, code, errOut, tc.says)
		}
	}
}
