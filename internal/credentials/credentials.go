// Package credentials keeps the API keys a person stored for model
// providers (`agentd auth set`) in the home's credentials file, and reads
// them back: once per change of the file, so a long-lived process picks a
// key stored after it started up on its next use.
//
// The file is JSON, mode 0600, replaced whole on every change, and never
// read or locked through a symbolic link:
//
//	{"version":1,"keys":{"anthropic":"sk-ant-…","openai":"sk-…"}}
//
// It knows nothing of providers beyond their names, and never puts a key
// into an error message.
package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/fswatch"
)

// FileName is the credentials file's name in the home.
const FileName = "credentials.json"

// lockName is the file whose lock serialises changes to the credentials
// file, so two `auth set` at once both keep their key.
const lockName = "credentials.lock"

// Version is the file format's version.
const Version = 1

// Limits of what the file may hold.
const (
	// MaxFileBytes bounds the file.
	MaxFileBytes = 64 << 10
	// MaxKeyBytes bounds one key.
	MaxKeyBytes = 4096
)

// Errors of the file's content.
var (
	// ErrDamaged is returned when the file is not a credentials file this
	// version can read; the error says what is wrong, never what a key is.
	ErrDamaged = errors.New("the credentials file is damaged")
	// ErrBadKey is returned by Set for a key that is empty, too long, or
	// holds spaces or control characters.
	ErrBadKey = errors.New("not an API key")
	// ErrBadProvider is returned for a provider name that is empty or not
	// made of lower-case letters, digits, '-' and '_'.
	ErrBadProvider = errors.New("not a provider name")
)

// File is the credentials file's content.
type File struct {
	Version int `json:"version"`
	// Keys maps a provider's name to its API key.
	Keys map[string]string `json:"keys"`
}

// Providers returns the names of the providers with a key, sorted.
func (f File) Providers() []string {
	return slices.Sorted(maps.Keys(f.Keys))
}

// Path returns where home keeps its credentials file.
func Path(home string) string { return filepath.Join(home, FileName) }

// Decode decodes a credentials file strictly: an unknown field, another
// version, a bad provider name or key, or trailing data is an error
// wrapping ErrDamaged that names the field.
func Decode(data []byte) (File, error) {
	if len(data) > MaxFileBytes {
		return File{}, fmt.Errorf("%w: larger than %d bytes", ErrDamaged, MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("%w: %s", ErrDamaged, describeJSON(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return File{}, fmt.Errorf("%w: data after the JSON object", ErrDamaged)
	}
	if f.Version != Version {
		return File{}, fmt.Errorf("%w: field \"version\": %d, want %d", ErrDamaged, f.Version, Version)
	}
	for name, key := range f.Keys {
		if err := CheckProvider(name); err != nil {
			return File{}, fmt.Errorf("%w: field \"keys\": %v", ErrDamaged, err)
		}
		if err := CheckKey(key); err != nil {
			return File{}, fmt.Errorf("%w: field \"keys.%s\": %v", ErrDamaged, name, err)
		}
	}
	if f.Keys == nil {
		f.Keys = map[string]string{}
	}
	return f, nil
}

// describeJSON says what a decode error found without quoting the data,
// which may be a key.
func describeJSON(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("not JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q: must be %s, not %s", typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "empty or cut short"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "not a credentials file"
}

// CheckProvider reports why name cannot name a provider, or nil.
func CheckProvider(name string) error {
	ok := name != "" && len(name) <= 64
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}
	if !ok {
		return fmt.Errorf("%w: %q (lower-case letters, digits, '-' and '_')", ErrBadProvider, name)
	}
	return nil
}

// CheckKey reports why key cannot be an API key, without quoting it.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: it is empty", ErrBadKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: it is longer than %d bytes", ErrBadKey, MaxKeyBytes)
	case strings.ContainsFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }):
		return fmt.Errorf("%w: it holds spaces or control characters", ErrBadKey)
	}
	return nil
}

// Read reads home's credentials file; a file that does not exist is an
// empty File.
func Read(home string) (File, error) {
	f, _, err := read(Path(home))
	return f, err
}

func read(path string) (File, stamp, error) {
	fh, err := atomicfile.Open(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return File{Version: Version, Keys: map[string]string{}}, stamp{}, nil
	}
	if err != nil {
		return File{}, stamp{}, fmt.Errorf("reading the credentials file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return File{}, stamp{}, fmt.Errorf("reading the credentials file: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return File{}, stamp{}, fmt.Errorf("reading the credentials file: %w", err)
	}
	f, err := Decode(data)
	if err != nil {
		return File{}, stamp{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, stampOf(fi), nil
}

// Set stores key as provider's, replacing the one it had.
func Set(home, provider, key string) error {
	if err := CheckProvider(provider); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	return update(home, func(f *File) { f.Keys[provider] = key })
}

// Remove removes provider's key and reports whether it had one.
func Remove(home, provider string) (bool, error) {
	if err := CheckProvider(provider); err != nil {
		return false, err
	}
	had := false
	err := update(home, func(f *File) {
		_, had = f.Keys[provider]
		delete(f.Keys, provider)
	})
	return had, err
}

// update changes the file under its lock, writing it whole, 0600.
func update(home string, edit func(*File)) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("creating the home: %w", err)
	}
	lock := flock.New(filepath.Join(home, lockName), flock.SetFlag(os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW), flock.SetPermissions(0o600))
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("locking the credentials file: %w", err)
	}
	defer lock.Unlock()
	f, err := Read(home)
	if err != nil {
		return err
	}
	edit(&f)
	data, err := json.MarshalIndent(File{Version: Version, Keys: f.Keys}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteDurable(Path(home), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the credentials file: %w", err)
	}
	return nil
}

// stamp tells one version of the file from another: a change replaces the
// file, giving it a new inode and change time.
type stamp struct {
	ino   uint64
	size  int64
	mtime time.Time
	ctime int64
}

func stampOf(fi fs.FileInfo) stamp {
	s := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
		s.ctime = st.Ctim.Nano()
	}
	return s
}

// Store is a home's credentials file as it is now: each call looks at the
// file and reads it again only when it changed. It is safe for concurrent
// use.
type Store struct {
	path string // constant

	mu sync.Mutex
	// watch reports changes of the file's directory entry, once it has
	// been looked at: a look costs a walk of the path, and a host asks
	// for the keys several times in each host.status.
	watch *fswatch.Watcher // guarded by mu; nil before the first look
	stamp stamp            // guarded by mu: of the file last read
	file  File             // guarded by mu
	err   error            // guarded by mu: why the file last read could not be
}

// NewStore returns the Store of home's credentials file.
func NewStore(home string) *Store {
	return &Store{path: Path(home), file: File{Version: Version, Keys: map[string]string{}}}
}

// Current returns the file's content, reading it again when it changed
// since the last call: a change another process made before the call
// (agentd auth) is seen. A file that cannot be read gives an empty File
// and the reason.
func (s *Store) Current() (File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watch == nil {
		// Watched before it is looked at: a change after the look is
		// reported.
		s.watch = fswatch.New()
		s.watch.Entry(s.path)
	} else if !s.watch.Changed() {
		return s.file, s.err
	}
	fi, err := os.Lstat(s.path)
	var now stamp
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// stamp{}: no file
	case err != nil:
		s.file, s.err, s.stamp = File{Keys: map[string]string{}}, fmt.Errorf("reading the credentials file: %w", err), stamp{}
		return s.file, s.err
	default:
		now = stampOf(fi)
	}
	if now == s.stamp {
		return s.file, s.err
	}
	f, st, err := read(s.path)
	if err != nil {
		f = File{Keys: map[string]string{}}
		st = now
	}
	s.file, s.stamp, s.err = f, st, err
	return s.file, s.err
}

// Key returns provider's stored key, "" when it has none.
func (s *Store) Key(provider string) string {
	f, _ := s.Current()
	return f.Keys[provider]
}
