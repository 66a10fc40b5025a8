package tools

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// sniffBytes is how much of a file is looked at to tell text from binary.
const sniffBytes = 8 << 10

// resolve turns a path the model wrote into one the process can open:
// relative paths are taken from the session's working directory.
func resolve(env *Env, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(env.Cwd, p)
}

// describe says what went wrong with a file in words that do not repeat the
// resolved path (the caller names the path the model wrote).
func describe(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, syscall.ENOTDIR):
		return "a part of the path is not a directory"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}

// isBinary reports whether the start of a file looks binary: a NUL byte in
// its first sniffBytes.
func isBinary(head []byte) bool {
	return bytes.IndexByte(head[:min(len(head), sniffBytes)], 0) >= 0
}

// writeAtomic replaces the file at p with data (atomicfile.WriteDurable),
// so a reader sees the old content or the new, never a mix. The file keeps
// its permissions if it existed and gets 0644 otherwise; missing parent
// directories are created. A symbolic link is followed and its target
// replaced. created reports whether the file is new.
func writeAtomic(p string, data []byte) (created bool, err error) {
	mode := fs.FileMode(0o644)
	if target, err := filepath.EvalSymlinks(p); err == nil {
		p = target
	}
	switch info, err := os.Stat(p); {
	case err == nil:
		if info.IsDir() {
			return false, errors.New("it is a directory")
		}
		if !info.Mode().IsRegular() {
			return false, errors.New("it is not a regular file")
		}
		mode = info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	case errors.Is(err, fs.ErrNotExist):
		created = true
	default:
		return false, errors.New(describe(err))
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("cannot create its directory: %s", describe(err))
	}
	if err := atomicfile.WriteDurable(p, data, mode); err != nil {
		return false, errors.New(describe(err))
	}
	return created, nil
}

// lineReader reads lines of any length, keeping at most max bytes of each.
type lineReader struct {
	br  *bufio.Reader
	max int
}

// next returns the next line without its newline, cut to max bytes, and
// how many bytes were cut. It returns io.EOF after the last line.
func (r *lineReader) next() (line []byte, cut int, err error) {
	for {
		chunk, err := r.br.ReadSlice('\n')
		if room := r.max - len(line); room > 0 {
			keep := chunk
			if len(keep) > room {
				cut += len(keep) - room
				keep = keep[:room]
			}
			line = append(line, keep...)
		} else {
			cut += len(chunk)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line)+cut == 0:
			return nil, 0, io.EOF
		case err != nil && err != io.EOF:
			return nil, 0, err
		}
		// Drop the line ending, which may sit in the kept or the cut part.
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			if cut > 0 {
				cut--
			} else {
				line = line[:len(line)-1]
			}
		}
		return line, cut, nil
	}
}

// skipDir reports whether a directory is never searched.
func skipDir(name string) bool { return name == ".git" || name == "node_modules" }

// globMatcher matches slash-separated relative paths against a glob in
// which "**" stands for any number of directories. A glob without a slash
// matches a name at any depth.
type globMatcher struct{ segs []string }

// newGlob compiles a glob, reporting a malformed one.
func newGlob(pattern string) (*globMatcher, error) {
	pattern = strings.TrimPrefix(filepath.ToSlash(pattern), "./")
	if pattern == "" {
		return nil, errors.New("the pattern is empty")
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, errors.New("the pattern must be relative; put the directory to search in path")
	}
	if !strings.Contains(pattern, "/") {
		pattern = "**/" + pattern
	}
	segs := strings.Split(pattern, "/")
	for _, s := range segs {
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("malformed pattern %q", pattern)
		}
	}
	return &globMatcher{segs: segs}, nil
}

// match reports whether the slash-separated relative path rel matches.
func (g *globMatcher) match(rel string) bool {
	return matchSegs(g.segs, strings.Split(rel, "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
