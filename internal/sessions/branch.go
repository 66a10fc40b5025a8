package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/protocol"
)

// Fork and rewind make a new session, a branch, whose transcript is a
// copy of the original's up to a record; the original is not touched.
// The branch's transcript is written here, before any worker of the new
// session runs, and read by that worker as any transcript: the turns,
// the conversation (its compactions included) and the rules it holds.
// Messages still queued at the cut are not copied: they were the
// original's to deliver.

func (s *Service) fork(_ context.Context, _ *server.Call, in *protocol.ForkInput) (protocol.Session, error) {
	h, err := s.resolve(in.SessionID)
	if err != nil {
		return protocol.Session{}, err
	}
	records, err := s.readTranscript(h)
	if err != nil {
		return protocol.Session{}, err
	}
	at := uint64(len(records))
	if in.AtSequence != nil {
		at = *in.AtSequence
		if at > uint64(len(records)) {
			return protocol.Session{}, protocol.InvalidField("input.atSequence", "session %s has %d records, not %d", h.ID, len(records), at)
		}
	}
	nh, err := s.branch(h, records[:at], in.Title, protocol.ForkedData{FromSessionID: h.ID, AtSequence: at})
	if err != nil {
		return protocol.Session{}, err
	}
	return s.session(nh), nil
}

func (s *Service) rewind(_ context.Context, _ *server.Call, in *protocol.RewindInput) (protocol.RewindResult, error) {
	h, err := s.resolve(in.SessionID)
	if err != nil {
		return protocol.RewindResult{}, err
	}
	if in.Files && s.status(h.ID) == protocol.SessionRunning {
		return protocol.RewindResult{}, protocol.Errorf(protocol.CodeOperationConflict,
			"session %s is running a turn, which may change files still; rewind its files once it ends", h.ID)
	}
	records, err := s.readTranscript(h)
	if err != nil {
		return protocol.RewindResult{}, err
	}
	start := slices.IndexFunc(records, func(r transcript.Record) bool {
		return r.Type == protocol.RecordTurnStart && r.TurnID == in.TurnID
	})
	if start < 0 {
		return protocol.RewindResult{}, protocol.InvalidField("input.turnId", "session %s has no turn %q", h.ID, in.TurnID)
	}
	var plan []restore
	if in.Files {
		if plan, err = s.planRestore(h, records[start:]); err != nil {
			return protocol.RewindResult{}, err
		}
	}
	data := protocol.ForkedData{FromSessionID: h.ID, AtSequence: uint64(start), RewoundTurnID: in.TurnID}
	out := protocol.RewindResult{Restored: []string{}, Removed: []string{}}
	for _, r := range plan {
		if r.existed {
			out.Restored = append(out.Restored, r.path)
		} else {
			out.Removed = append(out.Removed, r.path)
		}
	}
	data.Restored, data.Removed = out.Restored, out.Removed
	nh, err := s.branch(h, records[:start], in.Title, data)
	if err != nil {
		return protocol.RewindResult{}, err
	}
	for _, r := range plan {
		if err := r.apply(); err != nil {
			return protocol.RewindResult{}, protocol.Errorf(protocol.CodeInternalFailure,
				"session %s was made, but %s could not be put back: %v", nh.ID, r.path, err)
		}
	}
	out.Session = s.session(nh)
	return out, nil
}

// readTranscript reads session h's transcript, as its worker wrote it so
// far.
func (s *Service) readTranscript(h catalog.Header) ([]transcript.Record, error) {
	c, err := transcript.ReadAll(s.cat.TranscriptPath(h.ID))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "session %s's transcript cannot be read: %v", h.ID, err)
	}
	return c.Records, nil
}

// branch makes a new session like h whose transcript is records, a turn
// left open closed, and a forked record last.
func (s *Service) branch(h catalog.Header, records []transcript.Record, title string, data protocol.ForkedData) (catalog.Header, error) {
	if title == "" && h.Title != "" {
		title = branchTitle(h.Title)
	}
	nh, err := s.cat.Create(catalog.CreateOptions{Cwd: h.Cwd, Title: title, Model: h.Model, Thinking: h.Thinking, Approval: h.Approval,
		Sandbox: h.Sandbox, Network: h.Network, Plugins: h.Plugins})
	if err != nil {
		return catalog.Header{}, catalogError(err)
	}
	if err := s.writeBranch(h, nh, records, data); err != nil {
		if rerr := s.cat.Remove(nh.ID); rerr != nil {
			s.log.Error("removing a branch that could not be written", "session", nh.ID, "err", rerr)
		}
		return catalog.Header{}, protocol.Errorf(protocol.CodeInternalFailure, "the new session's transcript cannot be written: %v", err)
	}
	// A branch keeps the session's own MCP servers, as its plugin packages.
	s.mcpFiles.mu.Lock()
	err = mcp.CopySession(s.cfg.Home, h.ID, nh.ID)
	s.mcpFiles.mu.Unlock()
	if err != nil {
		s.log.Warn("a branch does not keep the session's own MCP servers", "session", nh.ID, "err", err)
	}
	return nh, nil
}

// branchTitle is the title of a branch of a session titled title.
func branchTitle(title string) string {
	const suffix = " (branch)"
	if r := []rune(title); len(r)+len([]rune(suffix)) > catalog.MaxTitleLen {
		title = string(r[:catalog.MaxTitleLen-len([]rune(suffix))])
	}
	return title + suffix
}

func (s *Service) writeBranch(from, to catalog.Header, records []transcript.Record, data protocol.ForkedData) error {
	stamp := time.Now()
	log, err := transcript.Open(s.cat.TranscriptPath(to.ID), transcript.Options{Now: func() time.Time { return stamp }})
	if err != nil {
		return err
	}
	defer log.Close()
	open := ""
	for _, r := range records {
		switch r.Type {
		case protocol.RecordQueueAdd, protocol.RecordQueueRetract:
			continue
		case protocol.RecordTurnStart:
			open = r.TurnID
		case protocol.RecordTurnEnd:
			open = ""
		case protocol.RecordFileChange:
			var d protocol.FileChangeData
			if json.Unmarshal(r.Data, &d) == nil && d.Before != "" {
				// The branch can rewind the turns it copied.
				if err := copyKept(filepath.Join(s.cat.Dir(from.ID), protocol.ChangesDir), filepath.Join(s.cat.Dir(to.ID), protocol.ChangesDir), d.Before); err != nil {
					return err
				}
			}
		}
		stamp = r.Time
		if _, err := log.Append(r.Type, r.TurnID, r.Data); err != nil {
			return err
		}
	}
	stamp = time.Now()
	if open != "" {
		if _, err := log.Append(protocol.RecordTurnEnd, open, protocol.TurnEndData{
			Status: protocol.TurnInterrupted, Error: "the session was branched before this turn ended",
		}); err != nil {
			return err
		}
	}
	if _, err := log.Append(protocol.RecordForked, "", data); err != nil {
		return err
	}
	return log.Close()
}

// copyKept copies the kept content named name from one session's changes
// folder to another's.
func copyKept(fromDir, toDir, name string) error {
	if !validHash(name) {
		return fmt.Errorf("a file change names %q, not a SHA-256", name)
	}
	dst := filepath.Join(toDir, name)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(fromDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never kept: a rewind of it refuses
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(toDir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteDurable(dst, b, 0o600)
}

func validHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// restore is one file a rewind puts back.
type restore struct {
	path    string
	existed bool
	content []byte
	mode    fs.FileMode
}

func (r restore) apply() error {
	if !r.existed {
		err := os.Remove(r.path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return atomicfile.WriteDurable(r.path, r.content, r.mode)
}

// planRestore finds the files that the turns of records changed and what
// each held before the first change, and checks that each holds now what
// the last change wrote. It refuses, listing them all, the files that
// changed on disk since and those whose content before was not kept.
func (s *Service) planRestore(h catalog.Header, records []transcript.Record) ([]restore, error) {
	type span struct {
		first, last protocol.FileChangeData
	}
	spans := map[string]*span{}
	var order []string
	for _, r := range records {
		if r.Type != protocol.RecordFileChange {
			continue
		}
		var d protocol.FileChangeData
		if err := json.Unmarshal(r.Data, &d); err != nil || !filepath.IsAbs(d.Path) {
			return nil, protocol.Errorf(protocol.CodeInternalFailure, "record %d of session %s is not a file change agentd can read", r.Seq, h.ID)
		}
		if sp, ok := spans[d.Path]; ok {
			sp.last = d
			continue
		}
		spans[d.Path] = &span{first: d, last: d}
		order = append(order, d.Path)
	}
	var plan []restore
	var conflicts []string
	for _, path := range order {
		sp := spans[path]
		now, mode, err := readNow(path)
		switch {
		case err != nil:
			conflicts = append(conflicts, fmt.Sprintf("%s (%v)", path, err))
			continue
		case now == nil || hashOf(now) != sp.last.After:
			conflicts = append(conflicts, path+" (changed since the agent wrote it)")
			continue
		case sp.first.Existed && (sp.first.NotKept || !validHash(sp.first.Before)):
			conflicts = append(conflicts, path+" (its content before was too large to keep)")
			continue
		}
		r := restore{path: path, existed: sp.first.Existed, mode: mode}
		if r.existed {
			b, err := os.ReadFile(filepath.Join(s.cat.Dir(h.ID), protocol.ChangesDir, sp.first.Before))
			if err != nil || hashOf(b) != sp.first.Before {
				conflicts = append(conflicts, path+" (its content before is missing from the session)")
				continue
			}
			r.content = b
		}
		plan = append(plan, r)
	}
	if len(conflicts) > 0 {
		return nil, protocol.Errorf(protocol.CodeOperationConflict, "no file was put back and no session made: %d of the files the rewound turns changed cannot be: %s",
			len(conflicts), strings.Join(conflicts, "; "))
	}
	return plan, nil
}

// readNow returns the content and permissions of the file at path, nil
// when there is none.
func readNow(path string) ([]byte, fs.FileMode, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	} else if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, errors.New("not a regular file")
	}
	b, err := io.ReadAll(f)
	if b == nil {
		b = []byte{}
	}
	return b, info.Mode().Perm(), err
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
