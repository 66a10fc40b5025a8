package cli_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestASessionIsTitledFromItsFirstPrompt: a session takes a short title of
// one line from its first prompt, untitled until then; ls, the picker and
// the ambiguity error show the title and, apart from it, the directory.
func TestASessionIsTitledFromItsFirstPrompt(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	p.mustRun("new", "--id", "alpha1", "--cwd", dir)
	p.mustRun("new", "--id", "alpha2", "--cwd", dir)
	p.mustRun("run", "--session", "alpha1", "--approve", "all", "fix the failing test in the catalog package\nthen run every test again")
	out := p.mustRun("ls")
	if !regexp.MustCompile(`(?m)^DIRECTORY|\tDIRECTORY|DIRECTORY\s*$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^alpha1\s+fix the failing test in the catalog package\s+.*`+regexp.QuoteMeta(dir)+`$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^alpha2\s+untitled\s+.*`+regexp.QuoteMeta(dir)+`$`).MatchString(out) {
		t.Fatalf("ls:\n%s", out)
	}
	// A later prompt leaves the title alone.
	p.mustRun("run", "--session", "alpha1", "--approve", "all", "and now the docs")
	_, errOut, code := p.run("log", "alpha")
	if code != 1 || !strings.Contains(errOut, "alpha1 (fix the failing test in the catalog package, in work)") || !strings.Contains(errOut, "alpha2 (untitled, in work)") {
		t.Fatalf("ambiguous: exit %d %s", code, errOut)
	}
	s := p.screenOf(t, p.commandIn(dir, "attach"))
	s.waitFor("the picker's rows with their titles and directory", func(screen string) bool {
		return regexp.MustCompile(`alpha1\s+fix the failing test in the cat\S*…\s+.*\bwork\b`).MatchString(screen) &&
			regexp.MustCompile(`alpha2\s+untitled\s+.*\bwork\b`).MatchString(screen)
	})
	s.typeKeys("\x1b")
	s.waitExit()
}
