package catalog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeSessionFolder makes <home>/sessions/<name> holding header.json with
// content b (none when b is nil).
func writeSessionFolder(t *testing.T, home, name string, b []byte) string {
	t.Helper()
	dir := filepath.Join(home, "sessions", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if b != nil {
		if err := os.WriteFile(filepath.Join(dir, "header.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func validHeaderBytes(t *testing.T, id string) []byte {
	t.Helper()
	c, _ := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: id, Cwd: t.TempDir()})
	b, err := os.ReadFile(filepath.Join(c.Dir(h.ID), "header.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAFolderWithAnUnreadableHeaderIsListedAsDamaged(t *testing.T) {
	good := validHeaderBytes(t, "good")
	cases := []struct {
		name   string
		make   func(t *testing.T, home string)
		reason string
	}{
		{"corrupt JSON", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", []byte(`{"schemaVersion":1,"id":"broken",`))
		}, "not valid JSON"},
		{"empty file", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", []byte{})
		}, "not valid JSON"},
		{"binary garbage", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", []byte{0xff, 0x00, 0x13})
		}, "not valid JSON"},
		{"JSON that is not a header", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", []byte(`["a"]`))
		}, "not valid JSON"},
		{"missing header", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", nil)
		}, "header.json is missing"},
		{"header is a directory", func(t *testing.T, home string) {
			dir := writeSessionFolder(t, home, "broken", nil)
			os.Mkdir(filepath.Join(dir, "header.json"), 0o700)
		}, "read header.json"},
		{"header is a symbolic link", func(t *testing.T, home string) {
			dir := writeSessionFolder(t, home, "broken", nil)
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			os.WriteFile(target, bytes.ReplaceAll(good, []byte(`"good"`), []byte(`"broken"`)), 0o600)
			os.Symlink(target, filepath.Join(dir, "header.json"))
		}, "symbolic link"},
		{"header of another folder", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", good)
		}, `header names session "good" but its folder is "broken"`},
		{"newer schema", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", bytes.Replace(
				bytes.ReplaceAll(good, []byte(`"good"`), []byte(`"broken"`)),
				[]byte(`"schemaVersion": 1`), []byte(`"schemaVersion": 7`), 1))
		}, "schemaVersion 7 is newer"},
		{"bad field", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", bytes.Replace(
				bytes.ReplaceAll(good, []byte(`"good"`), []byte(`"broken"`)),
				[]byte(`"approval": "ask"`), []byte(`"approval": "maybe"`), 1))
		}, "approval"},
		{"oversized header", func(t *testing.T, home string) {
			writeSessionFolder(t, home, "broken", bytes.Repeat([]byte(" "), maxHeaderBytes+1))
		}, "larger than"},
		{"unreadable file", func(t *testing.T, home string) {
			if os.Getuid() == 0 {
				t.Skip("root reads a file of mode 0000")
			}
			dir := writeSessionFolder(t, home, "broken", good)
			os.Chmod(filepath.Join(dir, "header.json"), 0)
		}, "permission denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			tc.make(t, home)
			writeSessionFolder(t, home, "healthy", bytes.ReplaceAll(good, []byte(`"good"`), []byte(`"healthy"`)))
			c := mustOpen(t, home)

			list := c.List(ListOptions{})
			if got := ids(list); !slices.Equal(got, []string{"healthy", "broken"}) {
				t.Fatalf("List = %v, want [healthy broken]", got)
			}
			d := list[1]
			if !d.Damaged || !strings.Contains(d.Damage, tc.reason) {
				t.Errorf("damaged entry %+v; want Damaged and a reason containing %q", d, tc.reason)
			}
			if !d.Session("").Damaged {
				t.Error("the protocol session is not marked damaged")
			}
			if h, err := c.Get("broken"); err != nil || !h.Damaged {
				t.Errorf("Get = %+v, %v", h, err)
			}
			if h, err := c.Resolve("bro"); err != nil || h.ID != "broken" {
				t.Errorf("Resolve(bro) = %+v, %v", h, err)
			}
			for name, do := range map[string]func() error{
				"rename":    func() error { _, err := c.Rename("broken", "x"); return err },
				"archive":   func() error { _, err := c.Archive("broken"); return err },
				"unarchive": func() error { _, err := c.Unarchive("broken"); return err },
				"set model": func() error { _, err := c.SetModel("broken", "faux/x"); return err },
			} {
				err := do()
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("%s: err = %v, want ErrDamaged naming the session and the reason", name, err)
				}
			}
			if _, err := c.Create(CreateOptions{ID: "broken", Cwd: t.TempDir()}); !errors.Is(err, ErrDuplicate) {
				t.Errorf("Create over a damaged folder: err = %v, want ErrDuplicate", err)
			}
			// Nothing was deleted or rewritten: a second Open sees the same.
			if got := mustOpen(t, home).List(ListOptions{}); !sameHeader(got[1], d) {
				t.Errorf("reopened damaged entry %+v, want %+v", got[1], d)
			}

			if err := c.Remove("broken"); err != nil {
				t.Fatalf("Remove of a damaged session: %v", err)
			}
			assertNotExist(t, filepath.Join(home, "sessions", "broken"))
			if got := ids(c.List(ListOptions{})); !slices.Equal(got, []string{"healthy"}) {
				t.Errorf("List after Remove = %v", got)
			}
		})
	}
}

func TestOpenLeavesTheBytesOfADamagedHeaderAsTheyAre(t *testing.T) {
	home := t.TempDir()
	raw := []byte(`{"schemaVersion":1,"id":"x","title":`)
	dir := writeSessionFolder(t, home, "x", raw)
	mustOpen(t, home)
	if b, err := os.ReadFile(filepath.Join(dir, "header.json")); err != nil || !bytes.Equal(b, raw) {
		t.Errorf("header.json = %q, %v; want it untouched", b, err)
	}
}

func TestOpenRemovesWhatInterruptedWritesLeft(t *testing.T) {
	c, home := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: "kept", Cwd: workDir(t, "w"), Title: "kept"})
	sessions := filepath.Join(home, "sessions")
	// Header and settings writes cut off before their rename, by this
	// version (a dot, the name, digits) and by older ones (".tmp").
	leftovers := []string{
		filepath.Join(c.Dir(h.ID), ".header.json8674665223082153551"),
		filepath.Join(c.Dir(h.ID), "header.json.tmp"),
		filepath.Join(home, ".settings.json42"),
		filepath.Join(home, "settings.json.tmp"),
	}
	for _, tmp := range leftovers {
		if err := os.WriteFile(tmp, []byte(`{"title":"half`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A create cut off before its folder was put in place, and a remove cut
	// off after its folder was moved out of place.
	creating := writeSessionFolder(t, home, ".creating-new-123", validHeaderBytes(t, "new"))
	removing := writeSessionFolder(t, home, ".removing-old-456", validHeaderBytes(t, "old"))
	os.WriteFile(filepath.Join(removing, "transcript.jsonl"), []byte("{}\n"), 0o600)

	again := mustOpen(t, home)
	for _, tmp := range leftovers {
		assertNotExist(t, tmp)
	}
	assertNotExist(t, creating)
	assertNotExist(t, removing)
	if names := sessionsDirNames(t, home); !slices.Equal(names, []string{"kept"}) {
		t.Errorf("%s holds %v, want only kept", sessions, names)
	}
	if got, err := again.Get("kept"); err != nil || !sameHeader(got, h) {
		t.Errorf("Get(kept) = %+v, %v; want %+v", got, err, h)
	}
	if _, err := again.Get("new"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a half-created session is listed: %v", err)
	}
}

func TestOpenIgnoresWhatIsNotASessionFolder(t *testing.T) {
	home := t.TempDir()
	sessions := filepath.Join(home, "sessions")
	os.MkdirAll(filepath.Join(sessions, "Not An Id"), 0o700)
	os.WriteFile(filepath.Join(sessions, "notes.txt"), []byte("mine"), 0o600)
	os.Symlink(t.TempDir(), filepath.Join(sessions, "linked"))
	c := mustOpen(t, home)
	if got := c.List(ListOptions{IncludeArchived: true}); len(got) != 0 {
		t.Errorf("List = %+v, want nothing", got)
	}
	if names := sessionsDirNames(t, home); len(names) != 3 {
		t.Errorf("Open deleted something: %v", names)
	}
}

func TestAnUnreadableSettingsFileIsMovedAsideNotLost(t *testing.T) {
	home := t.TempDir()
	raw := []byte(`{"defaultModel": "anthropic"}`) // a provider without a model
	if err := os.WriteFile(filepath.Join(home, "settings.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, home)
	if got := c.Settings(); got != (Settings{}) {
		t.Errorf("Settings = %+v, want empty", got)
	}
	aside := c.DamagedSettingsPath()
	if !strings.HasPrefix(aside, filepath.Join(home, "settings.json.damaged-")) {
		t.Fatalf("DamagedSettingsPath = %q", aside)
	}
	if b, err := os.ReadFile(aside); err != nil || !bytes.Equal(b, raw) {
		t.Errorf("moved-aside settings = %q, %v; want the original bytes", b, err)
	}
	if _, err := c.SetDefaultModel("faux/echo"); err != nil {
		t.Fatal(err)
	}
	if again := mustOpen(t, home); again.DamagedSettingsPath() != "" || again.Settings().DefaultModel != "faux/echo" {
		t.Errorf("reopened: moved %q, settings %+v", again.DamagedSettingsPath(), again.Settings())
	}
}

// A session folder copied by hand, or restored from a backup beside the
// original, holds a header naming the same id: selecting that id then
// fails naming every folder, until the copies are gone.
func TestACopiedSessionFolderMakesItsIDAmbiguous(t *testing.T) {
	c, home := openHome(t)
	mustCreate(t, c, CreateOptions{ID: "demo-1", Cwd: workDir(t, "one"), Title: "first"})
	b, err := os.ReadFile(filepath.Join(home, "sessions", "demo-1", "header.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeSessionFolder(t, home, "demo-1-copy", b)       // a valid id: its own damaged entry
	writeSessionFolder(t, home, "demo-1 (restored)", b) // not an id: only a copy
	again := mustOpen(t, home)

	_, err = again.Resolve("demo-1")
	var dup *DuplicateError
	if !errors.As(err, &dup) || !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Resolve(demo-1) = %v, want a DuplicateError", err)
	}
	if want := []string{"demo-1", "demo-1 (restored)", "demo-1-copy"}; dup.ID != "demo-1" || !slices.Equal(dup.Folders, want) {
		t.Fatalf("duplicate %+v, want demo-1 held by %v", dup, want)
	}
	for _, f := range dup.Folders {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%q does not name folder %q", err, f)
		}
	}
	if _, err := again.Create(CreateOptions{ID: "demo-1", Cwd: workDir(t, "two")}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Create(demo-1) = %v, want ErrDuplicate", err)
	}
	// The copy with an id's name is listed as damaged, and removing it
	// leaves the other copy.
	if h, err := again.Resolve("demo-1-copy"); err != nil || !h.Damaged || !strings.Contains(h.Damage, `names session "demo-1"`) {
		t.Fatalf("Resolve(demo-1-copy) = %+v, %v", h, err)
	}
	if err := again.Remove("demo-1-copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Resolve("demo-1"); !errors.As(err, &dup) || !slices.Equal(dup.Folders, []string{"demo-1", "demo-1 (restored)"}) {
		t.Fatalf("after removing one copy: %v", err)
	}
	// The other is moved out by hand; the next catalog selects the session.
	if err := os.Rename(filepath.Join(home, "sessions", "demo-1 (restored)"), filepath.Join(home, "restored")); err != nil {
		t.Fatal(err)
	}
	if h, err := mustOpen(t, home).Resolve("demo-1"); err != nil || h.Title != "first" {
		t.Fatalf("with the copies gone: %+v, %v", h, err)
	}
}
