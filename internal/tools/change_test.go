package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAndEditReportWhatTheyChangedWithTheContentBefore(t *testing.T) {
	dir := t.TempDir()
	var got []FileChange
	env := &Env{Cwd: dir, Changed: func(c FileChange) { got = append(got, c) }}
	mustOK(t, run(t, writeTool{}, env, `{"path":"a.txt","content":"one\n"}`))
	mustOK(t, run(t, editTool{}, env, `{"path":"a.txt","old_string":"one","new_string":"two"}`))
	mustOK(t, run(t, writeTool{}, env, `{"path":"a.txt","content":"three\n"}`))
	mustFail(t, run(t, editTool{}, env, `{"path":"a.txt","old_string":"absent","new_string":"x"}`))
	path := filepath.Join(dir, "a.txt")
	want := []struct {
		existed       bool
		before, after string
	}{{false, "", "one\n"}, {true, "one\n", "two\n"}, {true, "two\n", "three\n"}}
	if len(got) != len(want) {
		t.Fatalf("%d changes reported, want %d (a failed edit changes nothing)", len(got), len(want))
	}
	for i, w := range want {
		c := got[i]
		if c.Path != path || c.Existed != w.existed || string(c.Before) != w.before || string(c.After) != w.after || c.BeforeSize != int64(len(w.before)) {
			t.Errorf("change %d: %+v, want %+v", i+1, c, w)
		}
	}
	// Past the bound the content before is not kept, and said so.
	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", MaxBefore+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	got = nil
	mustOK(t, run(t, writeTool{}, env, `{"path":"big.txt","content":"small"}`))
	if len(got) != 1 || !got[0].TooLarge || got[0].Before != nil || got[0].BeforeSize != MaxBefore+1 {
		t.Fatalf("a large file's change: %+v", got)
	}
}
