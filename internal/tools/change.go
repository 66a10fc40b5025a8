package tools

import (
	"io"
	"os"
	"path/filepath"
)

// FileChange is a file the write or edit tool changed, with what it held
// before, for a rewind to put back.
type FileChange struct {
	// Path is the file's absolute path, symbolic links resolved.
	Path string
	// Tool and CallID name the call that changed it; the agent loop fills
	// them in.
	Tool, CallID string
	// Existed reports whether the file existed before.
	Existed bool
	// Before is the content before, when it existed and was at most
	// MaxBefore bytes; BeforeSize its size either way.
	Before     []byte
	BeforeSize int64
	// TooLarge is set when the content before was larger than MaxBefore
	// and is not in Before.
	TooLarge bool
	// After is the content the tool wrote.
	After []byte
}

// before reads what path holds now, for a FileChange: whether it exists,
// and its content when it is at most max bytes.
func before(path string, max int64) FileChange {
	c := FileChange{Path: path}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		c.Path = target
	}
	f, err := os.Open(c.Path)
	if err != nil {
		return c
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return c
	}
	c.Existed, c.BeforeSize = true, info.Size()
	if info.Size() > max {
		c.TooLarge = true
		return c
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(data)) > max {
		c.TooLarge = true
		return c
	}
	c.Before = data
	return c
}

// changed tells env's Changed of a change, if it listens.
func changed(env *Env, c FileChange, after []byte) {
	if env.Changed == nil {
		return
	}
	c.After = after
	env.Changed(c)
}
