package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCoverGrantsEverythingButTheHiddenPathsAndTheLinksLeadingThere(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "b/c", "b/home/sessions", "b/run", "f"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "b/file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"to-b":    "b",      // leads to the hidden home: left out
		"to-home": "b/home", // is the hidden home: left out
		"to-a":    "a",      // free: kept
		"dangles": "nowhere",
	} {
		if err := os.Symlink(filepath.Join(root, target), filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	hidden := []string{filepath.Join(root, "b/home"), filepath.Join(root, "b/run/agentd")} // the second does not exist
	got, split, err := cover(root, hidden)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{root, filepath.Join(root, "b"), filepath.Join(root, "b/run")}; !slices.Equal(split, want) {
		t.Errorf("split = %q, want %q", split, want)
	}
	var rel []string
	for _, g := range got {
		r, _ := filepath.Rel(root, g.path)
		rel = append(rel, r)
	}
	slices.Sort(rel)
	want := []string{"a", "b/c", "b/file", "f", "to-a"}
	if !slices.Equal(rel, want) {
		t.Fatalf("cover = %q, want %q", rel, want)
	}
}

func TestCoverOfAHiddenRootOrOfAFreeOne(t *testing.T) {
	for _, tc := range []struct {
		root   string
		hidden []string
		want   []string
	}{
		{"/x/home", []string{"/x/home"}, nil},
		{"/x/home/sub", []string{"/x/home"}, nil},
		{"/x/work", []string{"/x/home"}, []string{"/x/work"}},
		{"/x/homework", []string{"/x/home"}, []string{"/x/homework"}},
	} {
		grants, _, err := cover(tc.root, tc.hidden)
		var got []string
		for _, g := range grants {
			got = append(got, g.path)
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("cover(%s, %q) = %q, %v; want %q", tc.root, tc.hidden, got, err, tc.want)
		}
	}
}
