package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writePackage writes files (path relative to the package → content)
// under a new directory and returns it.
func writePackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadReadsManifestCommandsAndSkills(t *testing.T) {
	dir := writePackage(t, map[string]string{
		ManifestPath:             `{"name":"review-kit","version":"1.2.0","description":"Reviews code","author":{"name":"x"},"keywords":["a"]}`,
		"commands/review.md":     "---\ndescription: Review a file\nargument-hint: \"<file> [focus]\"\nallowed-tools:\n  - read\n  - grep\n---\nReview $1 with a focus on $2.\n",
		"commands/plain.md":      "Say hello.\n",
		"commands/notes.txt":     "not a command",
		"skills/style/SKILL.md":  "---\nname: style\ndescription: >\n  How this project\n  writes Go\n---\n# Style\nUse tabs.\n",
		"skills/empty/README.md": "a folder that is no skill",
	})
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "review-kit" || p.Version != "1.2.0" || p.Description != "Reviews code" || p.Dir != dir {
		t.Fatalf("package %+v", p)
	}
	if len(p.Commands) != 2 || p.Commands[0].Name != "plain" || p.Commands[1].Name != "review" {
		t.Fatalf("commands %+v", p.Commands)
	}
	r := p.Commands[1]
	if r.Description != "Review a file" || r.ArgumentHint != "<file> [focus]" || r.Body != "Review $1 with a focus on $2.\n" || r.Package != "review-kit" {
		t.Fatalf("review %+v", r)
	}
	if len(p.Skills) != 1 || p.Skills[0].Name != "style" || p.Skills[0].Description != "How this project writes Go" || p.Skills[0].Body != "# Style\nUse tabs.\n" {
		t.Fatalf("skills %+v", p.Skills)
	}
}

// TestLoadNamesTheFileAndFieldAtFault: every way a package can be wrong
// is an *Error naming its file and, where one is at fault, its field.
func TestLoadNamesTheFileAndFieldAtFault(t *testing.T) {
	good := `{"name":"kit"}`
	cases := []struct {
		name  string
		files map[string]string
		file  string // the path the error names, relative to the package
		field string
		says  string
	}{
		{"no manifest", map[string]string{"commands/a.md": "x"}, "", "", "not a plugin package"},
		{"manifest not an object", map[string]string{ManifestPath: `[1]`}, ManifestPath, "", "not a JSON object"},
		{"manifest not JSON", map[string]string{ManifestPath: `{"name":`}, ManifestPath, "", "not a JSON object"},
		{"no name", map[string]string{ManifestPath: `{"version":"1"}`}, ManifestPath, "name", "is missing"},
		{"name not a string", map[string]string{ManifestPath: `{"name":7}`}, ManifestPath, "name", "must be a string"},
		{"name with a space", map[string]string{ManifestPath: `{"name":"my kit"}`}, ManifestPath, "name", "may hold only"},
		{"version not a string", map[string]string{ManifestPath: `{"name":"kit","version":1}`}, ManifestPath, "version", "must be a string"},
		{"description with a newline", map[string]string{ManifestPath: `{"name":"kit","description":"a\nb"}`}, ManifestPath, "description", "control character"},
		{"front matter never closed", map[string]string{ManifestPath: good, "commands/a.md": "---\ndescription: x\n"}, "commands/a.md", "", "never closed"},
		{"front matter line without a key", map[string]string{ManifestPath: good, "commands/a.md": "---\njust words\n---\n"}, "commands/a.md", "", "line 2"},
		{"front matter key twice", map[string]string{ManifestPath: good, "commands/a.md": "---\ndescription: x\ndescription: y\n---\n"}, "commands/a.md", "description", "given twice"},
		{"command file name", map[string]string{ManifestPath: good, "commands/a b.md": "x"}, "commands/a b.md", "", "command's"},
		{"command not UTF-8", map[string]string{ManifestPath: good, "commands/a.md": "\xff\xfe"}, "commands/a.md", "", "UTF-8"},
		{"skill without front matter", map[string]string{ManifestPath: good, "skills/s/SKILL.md": "# s"}, "skills/s/SKILL.md", "", "no front matter"},
		{"skill without a name", map[string]string{ManifestPath: good, "skills/s/SKILL.md": "---\ndescription: d\n---\n"}, "skills/s/SKILL.md", "name", "is missing"},
		{"skill without a description", map[string]string{ManifestPath: good, "skills/s/SKILL.md": "---\nname: s\n---\n"}, "skills/s/SKILL.md", "description", "is missing"},
		{"two skills of a name", map[string]string{ManifestPath: good, "skills/a/SKILL.md": "---\nname: s\ndescription: d\n---\n", "skills/b/SKILL.md": "---\nname: s\ndescription: d\n---\n"}, "skills/b/SKILL.md", "name", "another skill"},
		{"command too large", map[string]string{ManifestPath: good, "commands/a.md": strings.Repeat("x", MaxFileBytes+1)}, "commands/a.md", "", "larger than"},
		{"commands too large together", bulky(good), "commands/c8.md", "", "together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writePackage(t, c.files)
			_, err := Load(dir)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want an *Error", err)
			}
			if want := filepath.Join(dir, c.file); pe.Path != want {
				t.Errorf("path %q, want %q", pe.Path, want)
			}
			if pe.Field != c.field {
				t.Errorf("field %q, want %q", pe.Field, c.field)
			}
			if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), pe.Path) {
				t.Errorf("error %q does not say %q with its file", err, c.says)
			}
		})
	}
}

// bulky is a package whose commands pass MaxPackageBytes at c8.md.
func bulky(manifest string) map[string]string {
	files := map[string]string{ManifestPath: manifest}
	for i := range 9 {
		files[fmt.Sprintf("commands/c%d.md", i)] = strings.Repeat("x", MaxFileBytes-1)
	}
	return files
}

func TestLoadRefusesARelativeDirectoryAndAFile(t *testing.T) {
	if _, err := Load("kit"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative: %v", err)
	}
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, nil, 0o644)
	if _, err := Load(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("file: %v", err)
	}
	if _, err := Load(filepath.Join(f, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing: %v", err)
	}
}

func TestExpandSubstitutesArgumentsAsClaudeCodeDoes(t *testing.T) {
	root := "/opt/kit"
	cases := []struct {
		body, args, want string
	}{
		{"Fix issue $ARGUMENTS now", "12 quickly", "Fix issue 12 quickly now"},
		{"Review $1 for $2.", `main.go "error handling"`, "Review main.go for error handling."},
		{"Review $1 for $2.", "main.go", "Review main.go for ."},
		{"$1$2$3", "a 'b c' d", "ab cd"},
		{"Costs $5 and $10", "x y z w v u t s r q", "Costs v and $10"},
		{"Price in $ stays", "", "Price in $ stays"},
		{"Run ${CLAUDE_PLUGIN_ROOT}/bin/check", "", "Run /opt/kit/bin/check"},
		{"Summarise the change.\n", "carefully", "Summarise the change.\n\nARGUMENTS: carefully\n"},
		{"Summarise the change.\n", "  ", "Summarise the change.\n"},
	}
	for _, c := range cases {
		cmd := Command{Body: c.body, root: root}
		if got := cmd.Expand(c.args); got != c.want {
			t.Errorf("Expand(%q) of %q = %q, want %q", c.args, c.body, got, c.want)
		}
	}
}

func TestParseInvocation(t *testing.T) {
	cases := []struct {
		line, name, args string
		ok               bool
	}{
		{"/review main.go  errors ", "review", "main.go  errors", true},
		{"/review", "review", "", true},
		{"  /kit:review x", "kit:review", "x", true},
		{"/etc/hosts what is this", "", "", false},
		{"review this", "", "", false},
		{"/", "", "", false},
		{"/ review", "", "", false},
		{"/a:b:c", "", "", false},
	}
	for _, c := range cases {
		name, args, ok := ParseInvocation(c.line)
		if name != c.name || args != c.args || ok != c.ok {
			t.Errorf("ParseInvocation(%q) = %q %q %v, want %q %q %v", c.line, name, args, ok, c.name, c.args, c.ok)
		}
	}
}

func TestASetLooksCommandsAndSkillsUpAcrossPackages(t *testing.T) {
	a := writePackage(t, map[string]string{
		ManifestPath: `{"name":"alpha"}`, "commands/hello.md": "alpha hello", "commands/only-a.md": "a",
		"skills/s/SKILL.md": "---\nname: s\ndescription: alpha's\n---\nalpha body",
	})
	b := writePackage(t, map[string]string{
		ManifestPath: `{"name":"beta"}`, "commands/hello.md": "beta hello",
		"skills/s/SKILL.md": "---\nname: s\ndescription: beta's\n---\nbeta body",
		"skills/t/SKILL.md": "---\nname: t\ndescription: beta's t\n---\nt body",
	})
	pkgs, err := LoadAll("plugins", []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(pkgs)
	if c, err := s.Command("only-a"); err != nil || c.Body != "a" {
		t.Fatalf("only-a: %+v %v", c, err)
	}
	if c, err := s.Command("beta:hello"); err != nil || c.Body != "beta hello" {
		t.Fatalf("beta:hello: %+v %v", c, err)
	}
	if _, err := s.Command("hello"); !errors.Is(err, ErrAmbiguousCommand) || !strings.Contains(err.Error(), "/alpha:hello or /beta:hello") {
		t.Fatalf("hello: %v", err)
	}
	_, err = s.Command("nope")
	if !errors.Is(err, ErrUnknownCommand) || !strings.Contains(err.Error(), "/alpha:hello, /only-a, /beta:hello") {
		t.Fatalf("nope: %v", err)
	}
	if k, err := s.Skill("t"); err != nil || k.Body != "t body" {
		t.Fatalf("t: %+v %v", k, err)
	}
	if k, err := s.Skill("alpha:s"); err != nil || k.Body != "alpha body" {
		t.Fatalf("alpha:s: %+v %v", k, err)
	}
	if _, err := s.Skill("s"); !errors.Is(err, ErrUnknownSkill) || !strings.Contains(err.Error(), "alpha:s, beta:s, t") {
		t.Fatalf("s: %v", err)
	}
	in := s.Instructions("skill")
	for _, want := range []string{"- alpha:s: alpha's", "- beta:s: beta's", "- t: beta's t", "skill tool"} {
		if !strings.Contains(in, want) {
			t.Errorf("instructions lack %q:\n%s", want, in)
		}
	}
	if NewSet(nil).Instructions("skill") != "" {
		t.Error("a set without skills has instructions")
	}
}

func TestLoadAllNamesTheFieldOfTheWrongPackage(t *testing.T) {
	a := writePackage(t, map[string]string{ManifestPath: `{"name":"kit"}`})
	b := writePackage(t, map[string]string{ManifestPath: `{"name":"kit"}`})
	bad := writePackage(t, map[string]string{ManifestPath: `{"name":""}`})
	cases := []struct {
		dirs []string
		says []string
	}{
		{[]string{a, b}, []string{`"plugins[1]"`, "is named as " + a}},
		{[]string{a, bad}, []string{`"plugins[1]"`, `field "name"`, "plugin.json"}},
		{[]string{a, a}, []string{`"plugins[1]"`, "is named as " + a}},
		{[]string{"rel"}, []string{`"plugins[0]"`, "absolute"}},
		{[]string{a, filepath.Join(a, "missing")}, []string{`"plugins[1]"`, "no such file"}},
	}
	for _, c := range cases {
		_, err := LoadAll("plugins", c.dirs)
		for _, want := range c.says {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("LoadAll(%q) = %v, want it to say %q", c.dirs, err, want)
			}
		}
	}
}
