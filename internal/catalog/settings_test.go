package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A session keeps its model when the home's default changes; sessions
// created after get the new default.
func TestASessionKeepsItsModelWhenTheDefaultChanges(t *testing.T) {
	c, home := openHome(t)
	if _, err := c.SetDefaultModel("anthropic/claude-opus-4-6"); err != nil {
		t.Fatal(err)
	}
	cwd := workDir(t, "w")
	h := mustCreate(t, c, CreateOptions{ID: "demo-1", Cwd: cwd, Model: c.ModelForNew("faux/default")})
	if h.Model != "anthropic/claude-opus-4-6" {
		t.Fatalf("new session model %q, want the home's default", h.Model)
	}

	// A second host starts on the same home with another default, and the
	// home's default changes too.
	second := mustOpen(t, home)
	if _, err := second.SetDefaultModel("openai/gpt-5"); err != nil {
		t.Fatal(err)
	}
	if got := second.ModelForNew("anthropic/claude-sonnet-4-5"); got != "openai/gpt-5" {
		t.Errorf("ModelForNew = %q, want the new default", got)
	}
	for _, c := range []*Catalog{second, mustOpen(t, home)} {
		if got, err := c.Get("demo-1"); err != nil || got.Model != "anthropic/claude-opus-4-6" {
			t.Errorf("demo-1 model = %q, %v; want anthropic/claude-opus-4-6 kept", got.Model, err)
		}
	}
	if got := mustCreate(t, second, CreateOptions{Cwd: cwd}); got.Model != "openai/gpt-5" {
		t.Errorf("a later session's model %q, want the new default", got.Model)
	}
}

// A new session gets the model selected last, which outlives the catalog
// that recorded it and leaves existing sessions as they were.
func TestANewSessionGetsTheModelSelectedLast(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "w")
	if _, err := c.SetDefaultModel("anthropic/claude-sonnet-4-5"); err != nil {
		t.Fatal(err)
	}
	first := mustCreate(t, c, CreateOptions{ID: "demo-1", Cwd: cwd})
	if first.Model != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("demo-1 model %q, want the default", first.Model)
	}
	// A client selects a model in demo-1: the session's and the home's.
	if _, err := c.SetModel("demo-1", "anthropic/claude-opus-4-6"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecordSelectedModel("anthropic/claude-opus-4-6"); err != nil {
		t.Fatal(err)
	}

	second := mustCreate(t, c, CreateOptions{ID: "demo-2", Cwd: cwd})
	if second.Model != "anthropic/claude-opus-4-6" {
		t.Errorf("demo-2 model %q, want the selected anthropic/claude-opus-4-6", second.Model)
	}
	// The selection outlives the host; the newest selection wins.
	again := mustOpen(t, home)
	if got := again.ModelForNew("faux/x"); got != "anthropic/claude-opus-4-6" {
		t.Errorf("reopened ModelForNew = %q", got)
	}
	if _, err := again.RecordSelectedModel("openai/gpt-5"); err != nil {
		t.Fatal(err)
	}
	if got := mustCreate(t, again, CreateOptions{Cwd: cwd}); got.Model != "openai/gpt-5" {
		t.Errorf("model %q, want the newest selection", got.Model)
	}
	for id, want := range map[string]string{"demo-1": "anthropic/claude-opus-4-6", "demo-2": "anthropic/claude-opus-4-6"} {
		if got, _ := again.Get(id); got.Model != want {
			t.Errorf("%s model %q changed by a later selection, want %q", id, got.Model, want)
		}
	}
}

func TestModelForNewPrefersSelectionThenDefaultThenHost(t *testing.T) {
	c, home := openHome(t)
	if got := c.ModelForNew("faux/host"); got != "faux/host" {
		t.Errorf("nothing set: %q, want the host's default", got)
	}
	if got := c.ModelForNew(""); got != "" {
		t.Errorf("nothing at all: %q", got)
	}
	c.SetDefaultModel("faux/home")
	if got := c.ModelForNew("faux/host"); got != "faux/home" {
		t.Errorf("default set: %q, want the home's default", got)
	}
	c.RecordSelectedModel("faux/picked")
	if got := c.ModelForNew("faux/host"); got != "faux/picked" {
		t.Errorf("selection made: %q, want it", got)
	}
	if s, err := c.SetDefaultModel(""); err != nil || s.DefaultModel != "" || s.LastSelectedModel != "faux/picked" {
		t.Errorf("clearing the default: %+v, %v", s, err)
	}

	path := filepath.Join(home, "settings.json")
	assertMode(t, path, 0o600)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk map[string]string
	if err := json.Unmarshal(b, &onDisk); err != nil || len(onDisk) != 1 || onDisk["lastSelectedModel"] != "faux/picked" {
		t.Errorf("settings.json = %s (%v)", b, err)
	}
}

// Seed 002: "rejects a provider without a model".
func TestRejectsAProviderWithoutAModel(t *testing.T) {
	c, home := openHome(t)
	for _, m := range []string{"anthropic", "anthropic/"} {
		for name, err := range map[string]error{
			"ValidModel":          ValidModel(m),
			"SetDefaultModel":     second(c.SetDefaultModel(m)),
			"RecordSelectedModel": second(c.RecordSelectedModel(m)),
			"Create":              second(c.Create(CreateOptions{Cwd: t.TempDir(), Model: m})),
		} {
			if !errors.Is(err, ErrInvalidModel) || !errors.Is(err, ErrInvalid) ||
				!strings.Contains(err.Error(), "provider requires a model") {
				t.Errorf("%s(%q): err = %v, want ErrInvalidModel saying the provider requires a model", name, m, err)
			}
		}
	}
	assertNotExist(t, filepath.Join(home, "settings.json"))
}

func second[T any](_ T, err error) error { return err }
