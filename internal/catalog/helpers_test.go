package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// openHome opens a catalog of a new home.
func openHome(t testing.TB) (*Catalog, string) {
	t.Helper()
	home := t.TempDir()
	return mustOpen(t, home), home
}

func mustOpen(t testing.TB, home string) *Catalog {
	t.Helper()
	c, err := Open(home)
	if err != nil {
		t.Fatalf("Open(%s): %v", home, err)
	}
	return c
}

// workDir returns a new directory for sessions to work in.
func workDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustCreate(t testing.TB, c *Catalog, opts CreateOptions) Header {
	t.Helper()
	h, err := c.Create(opts)
	if err != nil {
		t.Fatalf("Create(%+v): %v", opts, err)
	}
	return h
}

// sameHeader reports whether a and b hold the same values, comparing times
// as instants.
func sameHeader(a, b Header) bool {
	return a.SchemaVersion == b.SchemaVersion && a.ID == b.ID && a.Title == b.Title &&
		a.Cwd == b.Cwd && a.Model == b.Model && a.Thinking == b.Thinking &&
		a.Approval == b.Approval && a.CreatedAt.Equal(b.CreatedAt) &&
		a.UpdatedAt.Equal(b.UpdatedAt) && a.LastActivityAt.Equal(b.LastActivityAt) &&
		a.Archived == b.Archived && a.MetadataRevision == b.MetadataRevision &&
		a.Damaged == b.Damaged && a.Damage == b.Damage && slices.Equal(a.Plugins, b.Plugins)
}

func assertSameHeaders(t *testing.T, got, want []Header) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d headers, want %d:\ngot  %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range got {
		if !sameHeader(got[i], want[i]) {
			t.Errorf("header %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func ids(hs []Header) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %04o, want %04o", path, got, want)
	}
}

func assertNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: err = %v, want it gone", path, err)
	}
}

// sessionsDirNames lists the names in home's sessions directory.
func sessionsDirNames(t *testing.T, home string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(home, sessionsDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
