package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFiles writes files (path relative to root: content) under root; a
// path ending in / is a directory.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInstructionFilesFromTheRepositoryRootInward(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		cwd   string
		want  []string // paths relative to the test's root, outermost first
	}{
		{
			name:  "each directory up to the repository root, outermost first",
			files: map[string]string{"AGENTS.md": "above the repo", "repo/.git/": "", "repo/AGENTS.md": "root", "repo/a/CLAUDE.md": "a", "repo/a/b/AGENTS.md": "b"},
			cwd:   "repo/a/b",
			want:  []string{"repo/AGENTS.md", "repo/a/CLAUDE.md", "repo/a/b/AGENTS.md"},
		},
		{
			name:  "a .git file (a linked worktree) marks the root too",
			files: map[string]string{"AGENTS.md": "above", "repo/.git": "gitdir: elsewhere", "repo/AGENTS.md": "root", "repo/a/x.go": ""},
			cwd:   "repo/a",
			want:  []string{"repo/AGENTS.md"},
		},
		{
			name:  "AGENTS.md wins over CLAUDE.md in one directory",
			files: map[string]string{"repo/.git/": "", "repo/AGENTS.md": "agents", "repo/CLAUDE.md": "claude"},
			cwd:   "repo",
			want:  []string{"repo/AGENTS.md"},
		},
		{
			name:  "without a repository only the working directory's file counts",
			files: map[string]string{"AGENTS.md": "parent", "work/CLAUDE.md": "here"},
			cwd:   "work",
			want:  []string{"work/CLAUDE.md"},
		},
		{
			name:  "without a repository and without a file there is nothing",
			files: map[string]string{"AGENTS.md": "parent", "work/x": ""},
			cwd:   "work",
			want:  nil,
		},
		{
			name:  "an empty file gives nothing and is not listed",
			files: map[string]string{"repo/.git/": "", "repo/AGENTS.md": " \n", "repo/sub/AGENTS.md": "sub"},
			cwd:   "repo/sub",
			want:  []string{"repo/sub/AGENTS.md"},
		},
		{
			name:  "a directory named AGENTS.md is no file",
			files: map[string]string{"repo/.git/": "", "repo/AGENTS.md/": "", "repo/CLAUDE.md": "c"},
			cwd:   "repo",
			want:  nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			in, _ := LoadInstructions(filepath.Join(root, tc.cwd), 0)
			var got []string
			for _, f := range in {
				rel, _ := filepath.Rel(root, f.Path)
				got = append(got, rel)
				if want := tc.files[rel]; f.Text != want || f.Truncated || f.Size != int64(len(want)) {
					t.Errorf("%s: text %q size %d truncated %v, want %q whole", rel, f.Text, f.Size, f.Truncated, want)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("files = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestADirectoryNamedAGENTSmdIsReported(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"AGENTS.md/": ""})
	if _, err := LoadInstructions(root, 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("err = %v, want one saying AGENTS.md is not a regular file", err)
	}
}

// The bound keeps the nearest files whole and cuts the outer ones, on a
// rune's boundary, saying so in the prompt.
func TestInstructionsAreBoundedNearestFirst(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		".git/":         "",
		"AGENTS.md":     "root rule: " + strings.Repeat("é", 20), // 11 + 40 bytes
		"a/AGENTS.md":   "middle rule",                           // 11 bytes
		"a/b/AGENTS.md": "nearest rule",                          // 12 bytes
	})
	in, err := LoadInstructions(filepath.Join(root, "a", "b"), 12+11+20)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 3 {
		t.Fatalf("got %d files, want 3", len(in))
	}
	if in[2].Text != "nearest rule" || in[1].Text != "middle rule" || in[1].Truncated || in[2].Truncated {
		t.Errorf("nearer files = %+v, %+v, want both whole", in[1], in[2])
	}
	outer := in[0]
	if !outer.Truncated || outer.Size != 51 || outer.Text != "root rule: "+strings.Repeat("é", 4) {
		t.Errorf("outer file = %+v, want its first 19 bytes (20 cut on a rune), truncated, size 51", outer)
	}
	p := in.Prompt()
	if !strings.Contains(p, "it has 51 bytes, of which the first 19 are given") {
		t.Errorf("the prompt does not say the file was cut:\n%s", p)
	}
	if i, j, k := strings.Index(p, "root rule"), strings.Index(p, "middle rule"), strings.Index(p, "nearest rule"); !(i < j && j < k) {
		t.Errorf("the prompt is not outermost first:\n%s", p)
	}

	// With the bound used up by nearer files, the outer one is listed cut
	// to nothing.
	in, _ = LoadInstructions(filepath.Join(root, "a", "b"), 12+11)
	if len(in) != 3 || in[0].Text != "" || !in[0].Truncated {
		t.Fatalf("files = %+v, want the outer one listed, cut to nothing", in)
	}
	if !strings.Contains(in.Prompt(), "of which the first 0 are given") {
		t.Errorf("the prompt does not say the outer file was left out:\n%s", in.Prompt())
	}
}

func TestSystemPromptAppendsTheInstructions(t *testing.T) {
	if got := SystemPrompt("base", nil); got != "base" {
		t.Errorf("no instructions: %q", got)
	}
	got := SystemPrompt("base\n", Instructions{{Path: "/p/AGENTS.md", Text: "use tabs\n", Size: 9}})
	if !strings.HasPrefix(got, "base\n\n# Project instructions\n") || !strings.Contains(got, "## /p/AGENTS.md\n\nuse tabs\n") {
		t.Errorf("system prompt:\n%s", got)
	}
}
