package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateRefusesBadInputNamingTheField(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "w")
	file := filepath.Join(cwd, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		opts  CreateOptions
		field string
		says  string
	}{
		{"no cwd", CreateOptions{}, "cwd", "is required"},
		{"relative cwd", CreateOptions{Cwd: "src/app"}, "cwd", `"src/app" is not an absolute path`},
		{"missing cwd", CreateOptions{Cwd: filepath.Join(cwd, "gone")}, "cwd", "does not exist"},
		{"cwd is a file", CreateOptions{Cwd: file}, "cwd", "is not a directory"},
		{"uppercase id", CreateOptions{ID: "Demo", Cwd: cwd}, "id", `"Demo" must be lowercase`},
		{"id starting with a dash", CreateOptions{ID: "-x", Cwd: cwd}, "id", "starting with a letter or digit"},
		{"id with a slash", CreateOptions{ID: "a/b", Cwd: cwd}, "id", "must be lowercase"},
		{"id of dots", CreateOptions{ID: "..", Cwd: cwd}, "id", "must be lowercase"},
		{"long id", CreateOptions{ID: strings.Repeat("a", 65), Cwd: cwd}, "id", "at most 64"},
		{"blank title", CreateOptions{Cwd: cwd, Title: "   "}, "title", "must not be empty"},
		{"long title", CreateOptions{Cwd: cwd, Title: strings.Repeat("é", 201)}, "title", "at most 200 characters, not 201"},
		{"title with a newline", CreateOptions{Cwd: cwd, Title: "a\nb"}, "title", "control characters"},
		{"model without a provider", CreateOptions{Cwd: cwd, Model: "/gpt-5"}, "model", "has no provider"},
		{"model without a model", CreateOptions{Cwd: cwd, Model: "openai"}, "model", "provider requires a model"},
		{"model with a space", CreateOptions{Cwd: cwd, Model: "openai/gpt 5"}, "model", "spaces"},
		{"bad thinking", CreateOptions{Cwd: cwd, Thinking: "max"}, "thinking", `"max" is not a level`},
		{"bad approval", CreateOptions{Cwd: cwd, Approval: "yes"}, "approval", `"yes" is not a policy`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Create(tc.opts)
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || ie.Field != tc.field ||
				!strings.Contains(err.Error(), "the "+tc.field+" ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v; want ErrInvalid naming %s and saying %q", err, tc.field, tc.says)
			}
		})
	}
	if got := c.List(ListOptions{IncludeArchived: true}); len(got) != 0 {
		t.Errorf("bad input created sessions: %+v", got)
	}
	if names := sessionsDirNames(t, home); len(names) != 0 {
		t.Errorf("bad input left %v on disk", names)
	}
}

func TestLimitsAreInclusive(t *testing.T) {
	c, _ := openHome(t)
	cwd := workDir(t, "w")
	h := mustCreate(t, c, CreateOptions{ID: strings.Repeat("a", 64), Cwd: cwd, Title: strings.Repeat("é", 200)})
	if len(h.ID) != 64 || len([]rune(h.Title)) != 200 {
		t.Errorf("Create = %+v", h)
	}
	if h := mustCreate(t, c, CreateOptions{ID: "0_a-", Cwd: cwd}); h.ID != "0_a-" {
		t.Errorf("id %q", h.ID)
	}
}

func TestChangesRefuseBadInputAndLeaveTheHeaderAlone(t *testing.T) {
	c, home := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: "s1", Cwd: workDir(t, "w")})
	cases := []struct {
		name  string
		do    func() error
		field string
		says  string
	}{
		{"empty title", func() error { _, err := c.Rename("s1", ""); return err }, "title", "must not be empty"},
		{"blank title", func() error { _, err := c.Rename("s1", " \t "); return err }, "title", "must not be empty"},
		{"long title", func() error { _, err := c.Rename("s1", strings.Repeat("x", 201)); return err }, "title", "at most 200"},
		{"empty model", func() error { _, err := c.SetModel("s1", ""); return err }, "model", "must not be empty"},
		{"provider only", func() error { _, err := c.SetModel("s1", "faux"); return err }, "model", "provider requires a model"},
		{"bad thinking", func() error { _, err := c.SetThinking("s1", "extreme"); return err }, "thinking", "off, low, medium or high"},
		{"empty approval", func() error { _, err := c.SetApproval("s1", ""); return err }, "approval", "ask, all or read-only"},
		{"zero touch", func() error { _, err := c.Touch("s1", time.Time{}); return err }, "at", "must not be zero"},
	}
	for _, tc := range cases {
		err := tc.do()
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != tc.field || !strings.Contains(err.Error(), tc.says) ||
			!strings.Contains(err.Error(), "s1") {
			t.Errorf("%s: err = %v; want ErrInvalid naming %s and s1, saying %q", tc.name, err, tc.field, tc.says)
		}
	}
	if got, _ := mustOpen(t, home).Get("s1"); !sameHeader(got, h) {
		t.Errorf("header changed: %+v, want %+v", got, h)
	}
}

func TestChangesOfAnUnknownSessionNameIt(t *testing.T) {
	c, _ := openHome(t)
	for name, do := range map[string]func() error{
		"rename":  func() error { _, err := c.Rename("nope", "x"); return err },
		"touch":   func() error { _, err := c.Touch("nope", time.Now()); return err },
		"archive": func() error { _, err := c.Archive("nope"); return err },
		"remove":  func() error { return c.Remove("nope") },
		"get":     func() error { _, err := c.Get("nope"); return err },
	} {
		err := do()
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("%s: err = %v, want ErrNotFound naming nope", name, err)
		}
	}
}

func TestOpenRefusesAnEmptyHome(t *testing.T) {
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}
