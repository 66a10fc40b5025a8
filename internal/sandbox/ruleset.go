package sandbox

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/protocol"
)

// ruleset is a Landlock ruleset built for a Policy: its file, handed to
// each command's re-exec to enforce, and what it was built from.
type ruleset struct {
	file  *os.File
	flags uint32
	// split maps each directory the ruleset lists entry by entry to its
	// modification time then: an entry added since is not in it.
	split map[string]time.Time
}

// fresh reports whether no directory rs split has changed since.
func (rs *ruleset) fresh() bool {
	for dir, mtime := range rs.split {
		fi, err := os.Stat(dir)
		if err != nil || !fi.ModTime().Equal(mtime) {
			return false
		}
	}
	return true
}

// rulesetFile returns p's ruleset, built if need be, and a copy of its
// file: a command holds a copy of its own, since a ruleset built anew
// meanwhile may close the Policy's.
func (p *Policy) rulesetFile() (*ruleset, *os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := p.rulesetLocked()
	if err != nil {
		return nil, nil, err
	}
	file, err := dup(rs.file)
	return rs, file, err
}

// rulesetLocked returns p's ruleset, built anew when there is none yet or
// a directory it split has changed. p.mu is held.
func (p *Policy) rulesetLocked() (*ruleset, error) {
	if p.rs != nil && p.rs.fresh() {
		return p.rs, nil
	}
	rs, err := p.build()
	if err != nil {
		return nil, err
	}
	if p.rs != nil {
		p.rs.file.Close()
	}
	p.rs = rs
	return rs, nil
}

// devices are the device files every command may read and write: where
// output is thrown away, zeros and randomness, the terminal.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"}

// build builds p's ruleset: read beneath everything but the hidden paths
// (whose names may be listed),
// write beneath the private tmp and, in workspace mode, the workspace
// (but the hidden paths), the devices and the terminals; with the
// network off, no TCP port to bind or connect to; no signal to a process
// outside the sandbox.
func (p *Policy) build() (*ruleset, error) {
	var hidden []string
	for _, h := range p.Hidden {
		path, err := cleanAbs(h)
		if err != nil {
			return nil, err
		}
		hidden = append(hidden, path)
	}
	readable, split, err := cover("/", hidden)
	if err != nil {
		return nil, fmt.Errorf("listing what commands may read: %w", err)
	}
	// The directories on the way to a hidden path may be listed, as
	// `ls ~` or `find .` in a workspace holding agentd's home need: a
	// listing right is granted beneath them all, so the hidden paths'
	// entries can be named, never opened.
	listable := slices.Clone(split)
	write := []string{p.Tmp}
	if p.Mode != protocol.SandboxReadOnly {
		write = append(write, p.Workspace...)
	}
	var writable []grant
	for _, w := range write {
		path, err := cleanAbs(w)
		if err != nil {
			return nil, err
		}
		sub, subSplit, err := cover(path, hidden)
		if err != nil {
			return nil, fmt.Errorf("listing what commands may write: %w", err)
		}
		writable, split = append(writable, sub...), append(split, subSplit...)
	}
	rs := &ruleset{split: map[string]time.Time{}}
	for _, dir := range split {
		// Stamped before the rules are made: a change while they are is
		// seen next time.
		if fi, err := os.Stat(dir); err == nil {
			rs.split[dir] = fi.ModTime()
		}
	}
	dirs, files := byKind(readable)
	// An entry may vanish between its listing and its rule (a file of
	// another process's in /tmp): what is gone needs no rule.
	rules := []landlock.Rule{
		landlock.RODirs(dirs...).IgnoreIfMissing(),
		landlock.ROFiles(files...).IgnoreIfMissing(),
		landlock.PathAccess(ll.AccessFSReadDir, listable...).IgnoreIfMissing(),
		landlock.RWFiles(devices...).WithIoctlDev().IgnoreIfMissing(),
		landlock.RWFiles("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	dirs, files = byKind(writable)
	rules = append(rules,
		landlock.RWDirs(dirs...).WithRefer().WithResolveUnix().IgnoreIfMissing(),
		landlock.RWFiles(files...).WithResolveUnix().IgnoreIfMissing(),
	)
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: ll.ScopeSignal}
	if p.NetworkOff {
		cfg.HandledAccessNet = landlock.V11.HandledAccessNet // no rule: no port allowed
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return nil, fmt.Errorf("building the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, ErrUnavailable
	}
	rs.file, rs.flags = os.NewFile(uintptr(fd), "landlock-ruleset"), flags
	return rs, nil
}

// byKind parts grants into directories and the rest; a path of unknown
// kind that no longer exists is left out.
func byKind(grants []grant) (dirs, files []string) {
	for _, g := range grants {
		k := g.kind
		if k == unknown {
			var st unix.Stat_t
			if err := unix.Stat(g.path, &st); err != nil {
				continue
			}
			k = file
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				k = directory
			}
		}
		if k == directory {
			dirs = append(dirs, g.path)
		} else {
			files = append(files, g.path)
		}
	}
	return dirs, files
}
