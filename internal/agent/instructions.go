package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// InstructionNames are the names of a project's instruction files, in the
// order a directory's are looked for: a directory gives the model its
// first one that exists.
var InstructionNames = []string{"AGENTS.md", "CLAUDE.md"}

// MaxInstructionBytes bounds the project instructions given to the model,
// all files together.
const MaxInstructionBytes = 32 << 10

// InstructionFile is a project instruction file as given to the model.
type InstructionFile struct {
	// Path is the file's absolute path.
	Path string
	// Text is what the model is given: the file, or its start when it was
	// cut to fit the bound.
	Text string
	// Size is the file's size in bytes.
	Size int64
	// Truncated is set when Text is less than the whole file.
	Truncated bool
}

// Instructions are the project instruction files that apply in a
// directory, outermost first.
type Instructions []InstructionFile

// LoadInstructions reads the project instruction files that apply in cwd,
// as other coding agents do: in cwd and each of its parents up to the
// repository's root (the nearest directory holding .git), the directory's
// AGENTS.md, or its CLAUDE.md when it has no AGENTS.md. Outside a
// repository only cwd's file counts. The files together give the model at
// most limit bytes (MaxInstructionBytes when limit is 0 or less); nearer
// files take their share first, so a file far up the tree is the one cut
// (to nothing, when nearer ones used the whole bound: it is listed still,
// marked Truncated). A file that holds nothing is left out, and so is one
// that cannot be read: the error says which, and the files that could be
// read are returned with it.
func LoadInstructions(cwd string, limit int) (Instructions, error) {
	if limit <= 0 {
		limit = MaxInstructionBytes
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return nil, err
	}
	var nearestFirst Instructions
	var errs []error
	left := limit
	for _, dir := range instructionDirs(cwd) {
		f, ok, err := readInstructionFile(dir, left)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		left -= len(f.Text)
		nearestFirst = append(nearestFirst, f)
	}
	out := make(Instructions, 0, len(nearestFirst))
	for i := len(nearestFirst) - 1; i >= 0; i-- {
		out = append(out, nearestFirst[i])
	}
	return out, errors.Join(errs...)
}

// instructionDirs returns cwd and its parents up to the repository's root,
// nearest first; just cwd when no parent holds .git.
func instructionDirs(cwd string) []string {
	var dirs []string
	for dir := cwd; ; {
		dirs = append(dirs, dir)
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dirs
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dirs[:1]
		}
		dir = parent
	}
}

// readInstructionFile reads dir's instruction file, at most limit bytes of
// it. It reports false when dir has none, or one with nothing in it.
func readInstructionFile(dir string, limit int) (InstructionFile, bool, error) {
	for _, name := range InstructionNames {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return InstructionFile{}, false, err
		}
		if !fi.Mode().IsRegular() {
			return InstructionFile{}, false, fmt.Errorf("%s is not a regular file", path)
		}
		f, err := os.Open(path)
		if err != nil {
			return InstructionFile{}, false, err
		}
		defer f.Close()
		limit = max(limit, 0)
		// One byte past the limit tells a file that fits from one cut.
		b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
		if err != nil {
			return InstructionFile{}, false, fmt.Errorf("reading %s: %w", path, err)
		}
		out := InstructionFile{Path: path, Size: max(fi.Size(), int64(len(b)))}
		if len(b) > limit {
			out.Truncated = true
			b = cutRunes(b[:limit])
		}
		if !out.Truncated && strings.TrimSpace(string(b)) == "" {
			return InstructionFile{}, false, nil
		}
		out.Text = strings.ToValidUTF8(string(b), "\uFFFD")
		return out, true, nil
	}
	return InstructionFile{}, false, nil
}

// cutRunes drops the bytes of a rune that b's end cut in two.
func cutRunes(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// Prompt returns the instructions as a section of a system prompt, "" when
// there are none.
func (in Instructions) Prompt() string {
	if len(in) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Project instructions\n\n")
	b.WriteString("The project gives these instructions, one file after another from its root inward to the working directory. " +
		"Follow them; where two disagree, the later file, nearer the working directory, wins.\n")
	for _, f := range in {
		fmt.Fprintf(&b, "\n## %s\n\n", f.Path)
		if f.Text != "" {
			b.WriteString(strings.TrimRight(f.Text, "\n"))
			b.WriteString("\n\n")
		}
		if f.Truncated {
			fmt.Fprintf(&b, "(The file was cut here: it has %d bytes, of which the first %d are given, to keep the project's instructions within their bound.)\n",
				f.Size, len(f.Text))
		}
	}
	return b.String()
}

// SystemPrompt returns base followed by the instructions' section.
func SystemPrompt(base string, in Instructions) string {
	p := in.Prompt()
	switch {
	case p == "":
		return base
	case base == "":
		return p
	}
	return strings.TrimRight(base, "\n") + "\n\n" + p
}
