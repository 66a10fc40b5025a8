package resource

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// logBuffer is a Manager's log, for tests to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// logged returns the first log record with message msg.
func (l *logBuffer) logged(t *testing.T, msg string) map[string]any {
	t.Helper()
	for line := range strings.Lines(l.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			return rec
		}
	}
	t.Fatalf("no log record %q in\n%s", msg, l.String())
	return nil
}

func withLog(l *logBuffer) func(*Config) {
	return func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(l, nil)) }
}

func readRecord(t *testing.T, dir, ref string) Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ref+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// The resources of a session's earlier worker are listed by its next one
// as they ended, with their output and screens; a launch id of theirs is
// answered with them, and their refs are not given again. One still
// running when its worker died is stopped and recorded as ended.
func TestTheResourcesOfAnEarlierWorkerAreListedAsTheyEnded(t *testing.T) {
	earlier, seen, dir := newManager(t)
	shell := start(t, earlier, StartInput{LaunchID: "build", Command: "echo built; exit 3"})
	pty := start(t, earlier, StartInput{LaunchID: "top", Command: "printf 'the pty screen'", PTY: true, Cols: 40, Rows: 5})
	seen.exited(t, shell.Ref)
	seen.exited(t, pty.Ref)
	orphan := start(t, earlier, StartInput{LaunchID: "server", Command: "exec sleep 1000"})
	records := filepath.Join(dir, "resources")
	pid := readRecord(t, records, orphan.Ref).PID
	if !proc.Running(pid) {
		t.Fatal("the running resource's recorded pid does not run")
	}

	// The earlier worker is abandoned as it is, as if it had died.
	later, _, _ := newManager(t, func(c *Config) { c.Dir = records })
	list, err := later.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 3 {
		t.Fatalf("listed %+v, want the earlier worker's three", list.Resources)
	}
	got := map[string]protocol.Resource{}
	for _, r := range list.Resources {
		got[r.Ref] = r
	}
	if r := got[shell.Ref]; r.State != protocol.ResourceExited || r.ExitCode == nil || *r.ExitCode != 3 || r.Command != shell.Command {
		t.Fatalf("the ended shell run is listed as %+v", r)
	}
	if r := got[orphan.Ref]; r.State != protocol.ResourceExited || r.ExitCode != nil || r.EndedAt == nil {
		t.Fatalf("the resource whose worker died is listed as %+v, want exited, how unknown", r)
	}
	poll.Until(t, "the orphaned process to be stopped", func() bool { return !proc.Running(pid) })
	if out, _, err := later.Output(shell.Ref); err != nil || string(out) != "built\n" {
		t.Fatalf("the shell run's output %q, %v", out, err)
	}
	if text, err := later.ScreenText(pty.Ref); err != nil || !strings.Contains(text, "the pty screen") {
		t.Fatalf("the PTY's screen %q, %v", text, err)
	}
	again, err := later.Start(StartInput{LaunchID: "build", Command: shell.Command})
	if err != nil || again.Ref != shell.Ref {
		t.Fatalf("a retry of an earlier launch answered %+v, %v", again, err)
	}
	if stopped, err := later.Stop(shell.Ref); err != nil || stopped.State != protocol.ResourceExited {
		t.Fatalf("stopping an ended resource: %+v, %v", stopped, err)
	}
	next := start(t, later, StartInput{LaunchID: "next", Command: "true"})
	if next.Ref != "shell-4" {
		t.Fatalf("the next resource is %s, want shell-4: no earlier ref is given again", next.Ref)
	}
}

// A record that cannot be read is kept aside and the others listed; its
// ref, and the ref of a log without a record, are not given again.
func TestADamagedRecordIsKeptAsideAndTheOthersListed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "resources")
	os.MkdirAll(dir, 0o700)
	good := Record{Resource: protocol.Resource{SessionID: "s1", Ref: "shell-1", Kind: protocol.ResourceShell, Command: "make", State: protocol.ResourceExited}, LaunchID: "l1"}
	b, _ := json.Marshal(good)
	os.WriteFile(filepath.Join(dir, "shell-1.json"), b, 0o600)
	os.WriteFile(filepath.Join(dir, "pty-2.json"), []byte(`{"ref":"pty-2","kind":"pt`), 0o600)
	os.WriteFile(filepath.Join(dir, "shell-5.log"), []byte("output of a worker that kept no records\n"), 0o600)
	var log logBuffer
	m, _, _ := newManager(t, func(c *Config) { c.Dir = dir }, withLog(&log))
	list, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil || len(list.Resources) != 1 || list.Resources[0].Ref != "shell-1" {
		t.Fatalf("listed %+v, %v: want the good record alone", list.Resources, err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "pty-2.json.damaged-*"))
	if len(aside) != 1 {
		t.Fatalf("the damaged record was not kept aside: %v", aside)
	}
	log.logged(t, "a runtime resource's record cannot be read; it is kept aside")
	if r := start(t, m, StartInput{LaunchID: "l2", Command: "true"}); r.Ref != "shell-6" {
		t.Fatalf("the next resource is %s, want shell-6", r.Ref)
	}
}

// Seed 004: a launch whose first inspection fails is stopped so a retry
// cannot run it twice. agentd's first look at a launched command is its
// record: one that cannot be written is stopped before anyone learns of
// it, and answers internal_failure; a retry of the launch runs it once.
func TestALaunchWhoseFirstRecordFailsIsStoppedSoARetryCannotRunItTwice(t *testing.T) {
	var log logBuffer
	m, _, dir := newManager(t, withLog(&log))
	records := filepath.Join(dir, "resources")
	// A directory where shell-1's record goes: it cannot be written.
	if err := os.MkdirAll(filepath.Join(records, "shell-1.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := StartInput{LaunchID: "dev-server", Command: "exec sleep 1000"}
	_, err := m.Start(in)
	wantCode(t, err, protocol.CodeInternalFailure)
	first := int(log.logged(t, "a runtime resource cannot be recorded; it was stopped")["pid"].(float64))
	if proc.Running(first) {
		t.Fatalf("the launch that could not be recorded still runs as pid %d", first)
	}
	if list, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1"}); err != nil || len(list.Resources) != 0 {
		t.Fatalf("listed %+v, %v: the failed launch is not a resource", list.Resources, err)
	}

	os.Remove(filepath.Join(records, "shell-1.json"))
	r, err := m.Start(in)
	if err != nil {
		t.Fatal(err)
	}
	second := readRecord(t, records, r.Ref).PID
	if second == first || !proc.Running(second) || proc.Running(first) {
		t.Fatalf("after the retry: pid %d runs %v, pid %d runs %v; want the retry's alone", first, proc.Running(first), second, proc.Running(second))
	}
	if again, err := m.Start(in); err != nil || again.Ref != r.Ref {
		t.Fatalf("a second retry answered %+v, %v", again, err)
	}
}

// Seed 004: a failed canonical read requests a drain and reports
// internal_failure without details. The session's records are what its
// resources are on disk: when they cannot be read, the resources cannot
// be accounted for, so nothing new starts and what runs is stopped; the
// details go to the log.
func TestAFailedReadOfTheRecordsDrainsAndAnswersWithoutDetails(t *testing.T) {
	var log logBuffer
	file := filepath.Join(t.TempDir(), "resources")
	os.WriteFile(file, []byte("not a folder"), 0o600)
	m, _, _ := newManager(t, func(c *Config) { c.Dir = file }, withLog(&log))
	_, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	wantCode(t, err, protocol.CodeInternalFailure)
	if strings.Contains(err.Error(), file) || strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("the caller was told details: %v", err)
	}
	if rec := log.logged(t, "the session's runtime resource records cannot be read; its resources are stopping"); !strings.Contains(rec["err"].(string), "not a directory") {
		t.Fatalf("the log says %v", rec)
	}
	os.Remove(file) // readable again: the Manager drains all the same
	_, err = m.Start(StartInput{LaunchID: "l1", Command: "true"})
	wantCode(t, err, protocol.CodeDraining)
}

// An ended run's output is read from its log, not held in memory: a
// session that ran hundreds of commands keeps none of their output.
func TestAnEndedRunsOutputIsReadFromItsLog(t *testing.T) {
	m, seen, _ := newManager(t)
	r := start(t, m, StartInput{LaunchID: "l1", Command: "seq 1 20000; echo last line"})
	seen.exited(t, r.Ref)
	m.mu.Lock()
	res := m.byRef[r.Ref]
	m.mu.Unlock()
	res.outMu.Lock()
	held := res.kept != nil
	res.outMu.Unlock()
	if held {
		t.Fatal("the ended run's output is still held in memory")
	}
	out, dropped, err := m.Output(r.Ref)
	total := int64(len(out)) + dropped
	if err != nil || len(out) != keepBytes || !strings.HasSuffix(string(out), "19999\n20000\nlast line\n") || total != 108894+10 {
		t.Fatalf("output of %d bytes (%d dropped), ending %q: %v", len(out), dropped, out[max(0, len(out)-30):], err)
	}
}
