package resource

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// A resource's record, REF.json beside its log, is written when it starts
// and when it ends. The records are the session's resources as they are
// on disk: a later worker of the session reads them before it starts or
// lists anything, lists the resources of earlier workers as they ended,
// answers their launch ids with them, and never gives their refs again.

const recordSuffix = ".json"

// Record is a runtime resource as its worker records it in the session's
// folder, resources/REF.json beside its log: one JSON object and a
// newline, replaced whole. It is the worker's own file, no part of the
// client contract: it holds what only a later worker of the session needs
// (the process to kill if it still runs), so it lives beside the code that
// writes and reads it.
type Record struct {
	protocol.Resource
	LaunchID string `json:"launchId"`
	// Cols and Rows are a PTY's size as it started.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// PID is the process (and process group) the command ran as, and
	// ProcessStart its start time in clock ticks since boot, which tells
	// it from a later process given the same pid; 0 where unknown.
	PID          int    `json:"pid"`
	ProcessStart uint64 `json:"processStart,omitempty"`
}

// record writes r's record. Called with m.mu held.
func (m *Manager) recordLocked(r *resource) error {
	if m.cfg.Dir == "" {
		return nil
	}
	rec := Record{
		Resource: r.info, LaunchID: r.launch.LaunchID, PID: r.pgid, ProcessStart: r.procStart,
	}
	if r.launch.PTY {
		rec.Cols, rec.Rows = r.launch.Cols, r.launch.Rows
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.cfg.Dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(m.cfg.Dir, r.info.Ref+recordSuffix), append(b, '\n'), 0o600)
}

// loadLocked reads the records of the resources earlier workers of the
// session started, once. Called with m.mu held, before anything starts.
func (m *Manager) loadLocked() error {
	if m.loaded || m.cfg.Dir == "" {
		m.loaded = true
		return nil
	}
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var past []*resource
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		// No ref of a file here is given again: a log may have no
		// record, or a damaged one.
		if ref := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".log"), recordSuffix); validRef(ref) {
			m.refs = max(m.refs, refNumber(ref))
		}
		ref, ok := strings.CutSuffix(e.Name(), recordSuffix)
		if !ok || !validRef(ref) {
			continue
		}
		path := filepath.Join(m.cfg.Dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil || rec.Ref != ref || !strings.HasPrefix(ref, rec.Kind+"-") {
			// One damaged record is kept aside; the others are listed.
			aside, rerr := atomicfile.MoveAside(path, time.Now())
			if rerr != nil {
				return rerr
			}
			m.cfg.Logger.Error("a runtime resource's record cannot be read; it is kept aside", "ref", ref, "aside", aside, "err", cmp.Or(err, errors.New("it names another resource")))
			continue
		}
		past = append(past, m.pastLocked(rec))
	}
	slices.SortFunc(past, func(a, b *resource) int { return cmp.Compare(refNumber(a.info.Ref), refNumber(b.info.Ref)) })
	for _, r := range past {
		m.byRef[r.info.Ref] = r
		if r.launch.LaunchID != "" {
			m.launches[r.launch.LaunchID] = r
		}
	}
	m.order = append(past, m.order...)
	m.revision++
	m.loaded = true
	return nil
}

// pastLocked returns the resource an earlier worker recorded. One it
// recorded running had no end recorded: its worker ended first. Its
// process cannot be reached again, so if it still runs, its group is
// killed, and it is recorded as exited, how unknown.
func (m *Manager) pastLocked(rec Record) *resource {
	r := &resource{
		info: rec.Resource, pgid: rec.PID, procStart: rec.ProcessStart,
		launch: StartInput{LaunchID: rec.LaunchID, Command: rec.Command, PTY: rec.Kind == protocol.ResourcePTY, Cols: rec.Cols, Rows: rec.Rows},
		exited: make(chan struct{}), drained: make(chan struct{}), kept: newRing(keepBytes),
	}
	close(r.exited)
	close(r.drained)
	if r.info.State != protocol.ResourceExited {
		if proc.RunningSince(rec.PID, rec.ProcessStart) {
			signalGroup(rec.PID, syscall.SIGKILL)
			m.cfg.Logger.Warn("a runtime resource of an earlier worker still ran; it was killed", "ref", rec.Ref, "pid", rec.PID)
		}
		ended := time.Now().UTC()
		r.info.State, r.info.ExitCode, r.info.EndedAt = protocol.ResourceExited, nil, &ended
		if err := m.recordLocked(r); err != nil {
			m.cfg.Logger.Error("recording the end of an earlier worker's resource", "ref", rec.Ref, "err", err)
		}
	}
	tail, size := m.logTail(rec.Ref)
	if size > 0 || tail != nil {
		r.kept = nil // Output reads the log
	}
	if r.launch.PTY {
		r.screen = newScreen(cmp.Or(rec.Cols, defaultCols), cmp.Or(rec.Rows, defaultRows), m.cfg.ScreenSleep, nil)
		r.screen.add(tail, 0)
		r.screen.sleep(true)
	}
	return r
}

// logTail reads the last output ref's log holds, up to what a resource
// keeps in memory, and the log's size; nil and 0 without a log.
func (m *Manager) logTail(ref string) ([]byte, int64) {
	f, err := os.Open(m.LogPath(ref))
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0
	}
	if st.Size() > keepBytes {
		f.Seek(-keepBytes, io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, keepBytes))
	return b, max(st.Size(), int64(len(b)))
}

// refNumber returns the number of a valid ref.
func refNumber(ref string) int {
	_, n, _ := strings.Cut(ref, "-")
	i, _ := strconv.Atoi(n)
	return i
}

// unreadableLocked answers a failure to read the session's records: the
// resources cannot be accounted for, so the Manager drains (nothing new
// starts, what runs is stopped). The details go to the log, not to the
// caller.
func (m *Manager) unreadableLocked(err error) error {
	m.cfg.Logger.Error("the session's runtime resource records cannot be read; its resources are stopping", "dir", m.cfg.Dir, "err", err)
	if !m.draining {
		m.draining = true
		m.wg.Go(m.Drain)
	}
	return protocol.Errorf(protocol.CodeInternalFailure, "the session's runtime resources cannot be read: they are being stopped")
}
