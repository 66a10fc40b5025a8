package cli_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/activation"
)

// completions runs agentd __complete args… and returns the completions
// it offers, each "value\tdescription", and the directive line.
func completions(t *testing.T, p *place, args ...string) ([]string, string) {
	t.Helper()
	out := p.mustRun(append([]string{"__complete"}, args...)...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// TestCompletionOffersAgentdsOwnFromTheRunningHost: with no host running,
// completing offers nothing and starts none; with one, session ids with
// their titles and directories, a session's resource refs, models and
// providers, and the fixed words of flags.
func TestCompletionOffersAgentdsOwnFromTheRunningHost(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	if got, directive := completions(t, p, "attach", ""); len(got) != 0 || directive != ":4" {
		t.Fatalf("with no host: %q %s", got, directive)
	}
	if hosts, _ := activation.Discover(context.Background(), p.rundir); len(hosts) != 0 {
		t.Fatalf("completing started a host: %+v", hosts)
	}
	p.mustRun("new", "--id", "alpha1", "--cwd", dir)
	p.mustRun("new", "--id", "beta1", "--cwd", dir, "--title", "the docs")
	p.mustRun("run", "--session", "alpha1", "--approve", "all", "fix the build: run `echo built`")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"attach", ""}, []string{"alpha1\tfix the build: run `echo built`, in work", "beta1\tthe docs, in work"}},
		{[]string{"log", "b"}, []string{"beta1\tthe docs, in work"}},
		{[]string{"run", "--session", "al"}, []string{"alpha1\tfix the build: run `echo built`, in work"}},
		{[]string{"logs", "alpha1", ""}, []string{"shell-1\tshell exited: echo built"}},
		{[]string{"logs", "alpha1", "shell-1", ""}, nil},
		{[]string{"pty", "alpha1", ""}, nil},
		{[]string{"models", "select", "faux/"}, []string{"faux/echo\tthe default"}},
		{[]string{"auth", "set", "fa"}, []string{"faux\tconfigured"}},
		{[]string{"run", "--approve", ""}, []string{"ask", "all", "read-only"}},
		{[]string{"models", "thinking", ""}, []string{"off", "low", "medium", "high"}},
	} {
		got, directive := completions(t, p, c.args...)
		if !slices.Equal(got, c.want) || directive != ":4" {
			t.Errorf("__complete %q: %q %s; want %q", c.args, got, directive, c.want)
		}
	}
}
