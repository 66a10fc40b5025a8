// Package plugin reads plugin packages in Claude Code's layout: a
// directory holding .claude-plugin/plugin.json (the package's name,
// version and description), commands/*.md (prompt commands a person runs
// as /name), skills/*/SKILL.md (instructions the model may load) and
// .mcp.json (MCP servers, which the package reading MCP configuration
// reads itself).
//
// It owns the format: what a package may hold, how front matter and the
// manifest decode, and how a command's arguments expand into its prompt.
// Every file is input from outside: a file that does not fit is an Error
// naming the file and the field at fault. It knows nothing of sessions,
// workers or the host, which decide when a package is loaded and what is
// done with it.
package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// The files of a package, relative to its directory.
const (
	ManifestPath = ".claude-plugin/plugin.json"
	CommandsDir  = "commands"
	SkillsDir    = "skills"
	SkillFile    = "SKILL.md"
	// MCPConfigPath is the package's MCP servers, read by the MCP
	// configuration with ${CLAUDE_PLUGIN_ROOT} expanded to the package's
	// directory.
	MCPConfigPath = ".mcp.json"
)

// RootVariable is the variable a package's files name its own directory
// by, expanded in a command's prompt (and in its .mcp.json).
const RootVariable = "CLAUDE_PLUGIN_ROOT"

// Bounds of what a package may hold.
const (
	// MaxManifestBytes bounds plugin.json.
	MaxManifestBytes = 64 << 10
	// MaxFileBytes bounds one command or SKILL.md file.
	MaxFileBytes = 256 << 10
	// MaxPackageBytes bounds a package's commands and skills together.
	MaxPackageBytes = 2 << 20
	// MaxCommands and MaxSkills bound how many a package has.
	MaxCommands = 256
	MaxSkills   = 256
	// MaxNameLen bounds a package's, a command's and a skill's name.
	MaxNameLen = 64
	// MaxDescriptionLen bounds a description, in bytes.
	MaxDescriptionLen = 1024
)

// ErrNotPackage is returned (wrapped in an Error) for a directory that
// has no .claude-plugin/plugin.json.
var ErrNotPackage = errors.New("not a plugin package: it has no " + ManifestPath)

// Error reports a package file that does not fit the layout. It names
// the file and, when one is at fault, the field.
type Error struct {
	// Path is the file (or directory) at fault.
	Path string
	// Field is the manifest or front matter field at fault; empty when
	// the file as a whole is.
	Field string
	// Err says what is wrong.
	Err error
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: field %q: %v", e.Path, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func fileError(path, field, format string, args ...any) *Error {
	return &Error{Path: path, Field: field, Err: fmt.Errorf(format, args...)}
}

// Package is a loaded plugin package.
type Package struct {
	// Dir is the package's directory, absolute and clean.
	Dir         string
	Name        string
	Version     string
	Description string
	// Commands are the package's prompt commands, by name.
	Commands []Command
	// Skills are the package's skills, by name.
	Skills []Skill
}

// Command is a prompt command: a Markdown file whose body becomes the
// prompt, its arguments expanded (Expand).
type Command struct {
	// Name is the file's name without .md: the command is /Name.
	Name string
	// Package is the name of the package it comes from.
	Package string
	// Path is the command's file.
	Path string
	// Description and ArgumentHint come from the front matter
	// (description, argument-hint).
	Description  string
	ArgumentHint string
	// Body is the prompt template: the file without its front matter.
	Body string
	// root is the package's directory, for ${CLAUDE_PLUGIN_ROOT}.
	root string
}

// Skill is an instruction file the model may load by name.
type Skill struct {
	// Name and Description come from the front matter.
	Name        string
	Description string
	// Package is the name of the package it comes from.
	Package string
	// Path is the skill's SKILL.md; its directory holds what the skill
	// refers to.
	Path string
	// Body is SKILL.md without its front matter.
	Body string
}

// Manifest is what plugin.json says of a package. Claude Code's other
// fields (author, homepage, keywords, ...) are allowed and not kept.
type Manifest struct {
	Name        string
	Version     string
	Description string
}

// Load reads the package in dir, which must be absolute.
func Load(dir string) (*Package, error) {
	if !filepath.IsAbs(dir) {
		return nil, &Error{Path: dir, Err: errors.New("a package's directory must be an absolute path")}
	}
	dir = filepath.Clean(dir)
	info, err := os.Stat(dir)
	if err != nil {
		return nil, &Error{Path: dir, Err: describe(err)}
	}
	if !info.IsDir() {
		return nil, &Error{Path: dir, Err: errors.New("is not a directory")}
	}
	manifestPath := filepath.Join(dir, ManifestPath)
	b, err := readBounded(manifestPath, MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Path: dir, Err: ErrNotPackage}
	}
	if err != nil {
		return nil, &Error{Path: manifestPath, Err: err}
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, withPath(err, manifestPath)
	}
	p := &Package{Dir: dir, Name: m.Name, Version: m.Version, Description: m.Description}
	left := budget(MaxPackageBytes)
	if p.Commands, err = loadCommands(dir, p.Name, &left); err != nil {
		return nil, err
	}
	if p.Skills, err = loadSkills(dir, p.Name, &left); err != nil {
		return nil, err
	}
	return p, nil
}

// budget is what is left of MaxPackageBytes as a package's files are read.
type budget int64

// read reads a command or skill file within what is left.
func (b *budget) read(path string) ([]byte, error) {
	data, err := readBounded(path, min(MaxFileBytes, max(int64(*b), 0)))
	var large *tooLarge
	if errors.As(err, &large) && large.limit < MaxFileBytes {
		return nil, fmt.Errorf("is past the %d bytes a package's commands and skills may hold together", MaxPackageBytes)
	}
	*b -= budget(len(data))
	return data, err
}

// withPath sets the path of an Error that has none.
func withPath(err error, path string) error {
	var pe *Error
	if errors.As(err, &pe) && pe.Path == "" {
		pe.Path = path
		return pe
	}
	return &Error{Path: path, Err: err}
}

// DecodeManifest decodes plugin.json. The errors it returns are *Error
// without a Path, naming the field at fault.
func DecodeManifest(b []byte) (Manifest, error) {
	if len(b) > MaxManifestBytes {
		return Manifest{}, &Error{Err: fmt.Errorf("is larger than %d bytes", MaxManifestBytes)}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return Manifest{}, &Error{Err: errors.New("is not a JSON object")}
	}
	var m Manifest
	fields := []struct {
		name     string
		dst      *string
		required bool
	}{{"name", &m.Name, true}, {"version", &m.Version, false}, {"description", &m.Description, false}}
	for _, f := range fields {
		v, ok := raw[f.name]
		if !ok || string(v) == "null" {
			if f.required {
				return Manifest{}, &Error{Field: f.name, Err: errors.New("is missing")}
			}
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return Manifest{}, &Error{Field: f.name, Err: errors.New("must be a string")}
		}
	}
	if err := checkName(m.Name); err != nil {
		return Manifest{}, &Error{Field: "name", Err: err}
	}
	if err := checkText(m.Version, MaxNameLen); err != nil {
		return Manifest{}, &Error{Field: "version", Err: err}
	}
	if err := checkText(m.Description, MaxDescriptionLen); err != nil {
		return Manifest{}, &Error{Field: "description", Err: err}
	}
	return m, nil
}

func loadCommands(dir, pkg string, left *budget) ([]Command, error) {
	cdir := filepath.Join(dir, CommandsDir)
	ents, err := os.ReadDir(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Path: cdir, Err: describe(err)}
	}
	var out []Command
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".md")
		if !ok || e.IsDir() {
			continue
		}
		path := filepath.Join(cdir, e.Name())
		if err := checkName(name); err != nil {
			return nil, &Error{Path: path, Err: fmt.Errorf("the file's name is the command's: %w", err)}
		}
		if len(out) == MaxCommands {
			return nil, &Error{Path: cdir, Err: fmt.Errorf("holds more than %d commands", MaxCommands)}
		}
		b, err := left.read(path)
		if err != nil {
			return nil, &Error{Path: path, Err: err}
		}
		fm, err := ParseFrontMatter(b)
		if err != nil {
			return nil, withPath(err, path)
		}
		c := Command{Name: name, Package: pkg, Path: path, Body: fm.Body, root: dir,
			Description: fm.Fields["description"], ArgumentHint: fm.Fields["argument-hint"]}
		if err := checkText(c.Description, MaxDescriptionLen); err != nil {
			return nil, &Error{Path: path, Field: "description", Err: err}
		}
		if err := checkText(c.ArgumentHint, MaxDescriptionLen); err != nil {
			return nil, &Error{Path: path, Field: "argument-hint", Err: err}
		}
		out = append(out, c)
	}
	return out, nil
}

func loadSkills(dir, pkg string, left *budget) ([]Skill, error) {
	sdir := filepath.Join(dir, SkillsDir)
	ents, err := os.ReadDir(sdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Path: sdir, Err: describe(err)}
	}
	var out []Skill
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(sdir, e.Name(), SkillFile)
		b, err := left.read(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a folder of something else
		}
		if err != nil {
			return nil, &Error{Path: path, Err: err}
		}
		if len(out) == MaxSkills {
			return nil, &Error{Path: sdir, Err: fmt.Errorf("holds more than %d skills", MaxSkills)}
		}
		fm, err := ParseFrontMatter(b)
		if err != nil {
			return nil, withPath(err, path)
		}
		s := Skill{Name: fm.Fields["name"], Description: fm.Fields["description"], Package: pkg, Path: path, Body: fm.Body}
		if !fm.Present {
			return nil, &Error{Path: path, Err: errors.New("has no front matter: a skill starts with --- and its name and description")}
		}
		if err := checkName(s.Name); err != nil {
			return nil, &Error{Path: path, Field: "name", Err: err}
		}
		if s.Description == "" {
			return nil, &Error{Path: path, Field: "description", Err: errors.New("is missing: the model chooses a skill by it")}
		}
		if err := checkText(s.Description, MaxDescriptionLen); err != nil {
			return nil, &Error{Path: path, Field: "description", Err: err}
		}
		if slices.ContainsFunc(out, func(o Skill) bool { return o.Name == s.Name }) {
			return nil, &Error{Path: path, Field: "name", Err: fmt.Errorf("%q is the name of another skill of the package", s.Name)}
		}
		out = append(out, s)
	}
	return out, nil
}

// checkName checks a package's, command's or skill's name: 1 to
// MaxNameLen letters, digits, '-', '_' or '.', starting with a letter or
// digit.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("is missing")
	case len(name) > MaxNameLen:
		return fmt.Errorf("is longer than %d characters", MaxNameLen)
	case !isAlnum(name[0]):
		return fmt.Errorf("%q must start with a letter or a digit", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("%q may hold only letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkText checks a one-line text: valid UTF-8, no control characters,
// at most limit bytes.
func checkText(s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("is longer than %d bytes", limit)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New("holds a control character")
	}
	return nil
}

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, describe(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, describe(err)
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, describe(err)
	}
	if int64(len(b)) > limit {
		return nil, &tooLarge{limit}
	}
	if !utf8.Valid(b) {
		return nil, errors.New("is not valid UTF-8")
	}
	return bytes.TrimPrefix(b, []byte("\ufeff")), nil
}

// tooLarge is a file larger than the limit it was read with.
type tooLarge struct{ limit int64 }

func (e *tooLarge) Error() string { return fmt.Sprintf("is larger than %d bytes", e.limit) }

// describe says what went wrong with a file, without the path the
// Error names already.
func describe(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
