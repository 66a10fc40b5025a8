package resource

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// wait bounds every wait of these tests: generous, for a loaded machine.
const wait = 30 * time.Second

// seen records what a Manager tells, for tests to wait on.
type seen struct {
	mu      sync.Mutex
	cond    *sync.Cond
	updates []protocol.Resource
	output  map[string]*strings.Builder
	seqs    map[string][]uint64
}

func newSeen() *seen {
	s := &seen{output: map[string]*strings.Builder{}, seqs: map[string][]uint64{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *seen) update(r protocol.Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, r)
	s.cond.Broadcast()
}

func (s *seen) out(ref string, seq uint64, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.output[ref]
	if b == nil {
		b = &strings.Builder{}
		s.output[ref] = b
	}
	b.Write(data)
	s.seqs[ref] = append(s.seqs[ref], seq)
	s.cond.Broadcast()
}

// until waits for cond, checked with s locked, failing the test after wait.
func (s *seen) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timer := time.AfterFunc(wait, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", wait, what)
		}
		s.cond.Wait()
	}
}

// exited waits for ref's update that says it exited, and returns it.
func (s *seen) exited(t *testing.T, ref string) protocol.Resource {
	t.Helper()
	var got protocol.Resource
	s.until(t, ref+" to exit", func() bool {
		for _, u := range s.updates {
			if u.Ref == ref && u.State == protocol.ResourceExited {
				got = u
				return true
			}
		}
		return false
	})
	return got
}

// printed waits until ref's PTY output contains text.
func (s *seen) printed(t *testing.T, ref, text string) {
	t.Helper()
	s.until(t, fmt.Sprintf("%s to print %q", ref, text), func() bool {
		b := s.output[ref]
		return b != nil && strings.Contains(b.String(), text)
	})
}

func (s *seen) count(ref, text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.output[ref]; b != nil {
		return strings.Count(b.String(), text)
	}
	return 0
}

// newManager returns a Manager of a session whose folder is a temporary
// directory, closed when the test ends.
func newManager(t *testing.T, tweak ...func(*Config)) (*Manager, *seen, string) {
	t.Helper()
	s := newSeen()
	dir := t.TempDir()
	cfg := Config{
		SessionID: "s1", Dir: filepath.Join(dir, "resources"), Env: os.Environ(),
		Grace:    200 * time.Millisecond,
		Admit:    func() (string, error) { return dir, nil },
		OnUpdate: s.update, OnOutput: s.out,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	m := New(cfg)
	t.Cleanup(m.Close)
	return m, s, dir
}

func start(t *testing.T, m *Manager, in StartInput) protocol.Resource {
	t.Helper()
	r, err := m.Start(in)
	if err != nil {
		t.Fatalf("Start(%+v): %v", in, err)
	}
	return r
}

func wantCode(t *testing.T, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
}

func TestAShellRunKeepsItsOutputInMemoryAndInItsLogAndReportsItsExit(t *testing.T) {
	m, s, dir := newManager(t)
	r := start(t, m, StartInput{LaunchID: "l1", Command: "pwd; echo to-err >&2; exit 3"})
	if r.Ref != "shell-1" || r.Kind != protocol.ResourceShell || r.State != protocol.ResourceRunning || r.Cwd != dir {
		t.Fatalf("started %+v", r)
	}
	end := s.exited(t, r.Ref)
	if end.ExitCode == nil || *end.ExitCode != 3 || end.EndedAt == nil {
		t.Fatalf("ended %+v, want exit code 3 and an end time", end)
	}
	want := dir + "\nto-err\n"
	m.wg.Wait() // the reader has finished with the log
	out, dropped, err := m.Output(r.Ref)
	if err != nil || string(out) != want || dropped != 0 {
		t.Fatalf("Output = %q, %d, %v; want %q", out, dropped, err, want)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "resources", "shell-1.log"))
	if err != nil || string(logged) != want {
		t.Fatalf("log %q, %v; want %q", logged, err, want)
	}
}

func TestALaunchIDStartsOneResourceAndARetryWithOtherInputConflicts(t *testing.T) {
	m, _, _ := newManager(t)
	in := StartInput{LaunchID: "l1", Command: "sleep 1000"}
	first := start(t, m, in)
	again := start(t, m, in)
	if again != first {
		t.Fatalf("a retry answered %+v, want %+v", again, first)
	}
	_, err := m.Start(StartInput{LaunchID: "l1", Command: "sleep 2000"})
	wantCode(t, err, protocol.CodeOperationConflict)
	if n := m.Running(); n != 1 {
		t.Fatalf("%d resources run, want 1", n)
	}
}

func TestStoppingAResourceEndsItsWholeProcessGroup(t *testing.T) {
	m, _, dir := newManager(t)
	pidFile := filepath.Join(dir, "child")
	r := start(t, m, StartInput{LaunchID: "l1", Command: "sleep 1000 & echo $! > " + pidFile + "; wait"})
	var child int
	for deadline := time.Now().Add(wait); child == 0; {
		b, _ := os.ReadFile(pidFile)
		fmt.Sscan(string(b), &child)
		if time.Now().After(deadline) {
			t.Fatal("the child never wrote its pid")
		}
		if child == 0 {
			time.Sleep(5 * time.Millisecond) // polling a file the shell writes: no event to wait on
		}
	}
	got, err := m.Stop(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != protocol.ResourceExited || got.ExitCode == nil || *got.ExitCode != 128+int(syscall.SIGTERM) {
		t.Fatalf("stopped %+v, want exited by SIGTERM (143)", got)
	}
	// The child was killed with the group; it may take a moment to die.
	for deadline := time.Now().Add(wait); proc.Running(child); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the background child %d outlived its run", child)
		}
	}
}

func TestStoppingKillsAProcessThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	m, s, _ := newManager(t)
	r := start(t, m, StartInput{LaunchID: "l1", Command: "trap '' TERM; sleep 1000 & echo ready; wait; wait", PTY: true})
	s.printed(t, r.Ref, "ready")
	got, err := m.Stop(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExitCode == nil || *got.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("stopped %+v, want killed (137)", got)
	}
}

// Closing the Manager stops reading a PTY that a process which left the
// PTY's group still holds open: what it may print yet is abandoned.
func TestCloseAbandonsAPTYAProcessOutsideItsGroupHoldsOpen(t *testing.T) {
	m, s, _ := newManager(t)
	r := start(t, m, StartInput{LaunchID: "l1", Command: "setsid sh -c 'echo held by $$.; exec sleep 1000' & wait", PTY: true})
	var pid int
	s.until(t, "the process outside the group to start", func() bool {
		b := s.output[r.Ref]
		return b != nil && regexp.MustCompile(`held by (\d+)\.`).MatchString(b.String())
	})
	s.mu.Lock()
	fmt.Sscanf(regexp.MustCompile(`held by \d+\.`).FindString(s.output[r.Ref].String()), "held by %d.", &pid)
	s.mu.Unlock()
	defer syscall.Kill(pid, syscall.SIGKILL)
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(wait):
		syscall.Kill(pid, syscall.SIGKILL) // lets the reader go
		t.Fatalf("Close still waits %v after the grace for the output of process %d, which left the PTY's group", wait, pid)
	}
}

// Seed 004: runtime resource list pages by revision and cursor and reports
// a changed revision.
func TestResourceListPagesByRevisionAndCursorAndReportsAChangedRevision(t *testing.T) {
	m, _, _ := newManager(t)
	for i := range 3 {
		start(t, m, StartInput{LaunchID: fmt.Sprint("l", i), Command: "sleep 1000"})
	}
	first, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if refs(first.Resources) != "shell-1 shell-2" || first.NextCursor == nil {
		t.Fatalf("first page %s, cursor %v", refs(first.Resources), first.NextCursor)
	}
	rest, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1", Limit: 2, Revision: &first.Revision, Cursor: first.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if refs(rest.Resources) != "shell-3" || rest.NextCursor != nil || rest.Revision != first.Revision {
		t.Fatalf("second page %s, cursor %v, revision %d (first %d)", refs(rest.Resources), rest.NextCursor, rest.Revision, first.Revision)
	}

	start(t, m, StartInput{LaunchID: "l9", Command: "sleep 1000"})
	_, err = m.Query(protocol.ResourceQueryInput{SessionID: "s1", Limit: 2, Revision: &first.Revision, Cursor: first.NextCursor})
	wantCode(t, err, protocol.CodeOperationConflict)
	if !strings.Contains(err.Error(), fmt.Sprint("revision ", first.Revision)) {
		t.Fatalf("the conflict does not name the revision: %v", err)
	}
	again, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil || refs(again.Resources) != "shell-1 shell-2 shell-3 shell-4" || again.Revision == first.Revision {
		t.Fatalf("listing again: %s at revision %d, %v", refs(again.Resources), again.Revision, err)
	}
}

// Seed 004: runtime resource query rejects an unsupported ref and an
// invalid cursor.
func TestResourceQueryRejectsAnUnsupportedRefAndAnInvalidCursor(t *testing.T) {
	m, _, _ := newManager(t)
	start(t, m, StartInput{LaunchID: "l1", Command: "sleep 1000"})
	start(t, m, StartInput{LaunchID: "l2", Command: "sleep 1000"})
	page, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"bogus", "shell-", "shell-0", "shell-01", "pty-x", "../shell-1"} {
		_, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1", Ref: ref})
		wantCode(t, err, protocol.CodeInvalidRequest)
		if !strings.Contains(err.Error(), "input.ref") {
			t.Fatalf("ref %q: the error does not name the field: %v", ref, err)
		}
	}
	_, err = m.Query(protocol.ResourceQueryInput{SessionID: "s1", Ref: "pty-7"})
	wantCode(t, err, protocol.CodeNotFound)
	one, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1", Ref: "shell-2"})
	if err != nil || refs(one.Resources) != "shell-2" {
		t.Fatalf("reading shell-2: %s, %v", refs(one.Resources), err)
	}
	for _, cursor := range []string{"", "0", "2", "-1", "01", "x", "99"} {
		_, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1", Revision: &page.Revision, Cursor: &cursor})
		wantCode(t, err, protocol.CodeInvalidRequest)
		if !strings.Contains(err.Error(), "input.cursor") {
			t.Fatalf("cursor %q: the error does not name the field: %v", cursor, err)
		}
	}
	one1 := "1"
	_, err = m.Query(protocol.ResourceQueryInput{SessionID: "s1", Cursor: &one1})
	wantCode(t, err, protocol.CodeInvalidRequest)
}

func refs(rs []protocol.Resource) string {
	var names []string
	for _, r := range rs {
		names = append(names, r.Ref)
	}
	return strings.Join(names, " ")
}

func TestAPTYKeepsItsScreenAndStreamsItsOutputInOrder(t *testing.T) {
	m, s, _ := newManager(t)
	r := start(t, m, StartInput{LaunchID: "l1", Command: "printf '\\033[31mred\\033[0m plain\\n'; for i in 1 2 3; do echo line $i; done; sleep 1000", PTY: true, Cols: 40, Rows: 10})
	if r.Ref != "pty-1" || r.Kind != protocol.ResourcePTY {
		t.Fatalf("started %+v", r)
	}
	s.printed(t, r.Ref, "line 3")
	var screen string
	var seq uint64
	if err := m.Screen(r.Ref, func(sc string, q uint64) { screen, seq = sc, q }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"red", "plain", "line 1\r\n", "line 3", "\x1b[31m"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("screen %q lacks %q", screen, want)
		}
	}
	if !strings.HasSuffix(screen, "\x1b[5;1H") {
		t.Fatalf("screen %q does not end with the cursor on row 5", screen)
	}
	s.mu.Lock()
	seqs := slices.Clone(s.seqs[r.Ref])
	s.mu.Unlock()
	for i, q := range seqs {
		if q != uint64(i+1) {
			t.Fatalf("output sequences %v, want 1, 2, 3…", seqs)
		}
	}
	if seq != seqs[len(seqs)-1] {
		t.Fatalf("the screen is at sequence %d, the output at %d", seq, seqs[len(seqs)-1])
	}
}

func TestPTYOutputCutInsideAUTF8SequenceIsSentWhole(t *testing.T) {
	m, s, _ := newManager(t)
	r := &resource{info: protocol.Resource{Ref: "pty-1"}, kept: newRing(16)}
	r.screen = newScreen(10, 5, time.Hour, nil)
	euro := []byte("€") // three bytes
	m.output(r, append([]byte("a"), euro[:1]...))
	m.output(r, euro[1:2])
	m.output(r, append(euro[2:], 'b'))
	s.mu.Lock()
	got, seqs := s.output["pty-1"].String(), s.seqs["pty-1"]
	s.mu.Unlock()
	if got != "a€b" || !slices.Equal(seqs, []uint64{1, 2}) {
		t.Fatalf("sent %q in sequences %v, want \"a€b\" in 1, 2", got, seqs)
	}
}

// A sequence held back after one it completes does not overwrite the
// output it was cut from, whose memory it may share.
func TestPTYOutputCutAfterACompletedUTF8SequenceIsSentIntact(t *testing.T) {
	m, s, _ := newManager(t)
	r := &resource{info: protocol.Resource{Ref: "pty-1"}, kept: newRing(16)}
	r.screen = newScreen(10, 5, time.Hour, nil)
	euro, smile := []byte("€"), []byte("😀")
	m.output(r, append([]byte("a"), euro[:2]...))
	m.output(r, append(euro[2:], smile[:2]...))
	m.output(r, smile[2:])
	s.mu.Lock()
	got := s.output["pty-1"].String()
	s.mu.Unlock()
	if got != "a€😀" {
		t.Fatalf("sent %q, want \"a€😀\"", got)
	}
}

// Seed 004: a PTY has at most one controller and a controller identity
// binds one resource.
func TestAPTYHasAtMostOneControllerAndAControllerBindsOneResource(t *testing.T) {
	m, _, _ := newManager(t)
	a := start(t, m, StartInput{LaunchID: "l1", Command: "cat", PTY: true})
	b := start(t, m, StartInput{LaunchID: "l2", Command: "cat", PTY: true})
	ctl, err := m.Acquire("conn-1", protocol.ResourceController{ConnectionID: "conn-1"}, a.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if ctl.NextSequence != 1 || ctl.Resource.Ref != a.Ref || ctl.ControllerID == "" {
		t.Fatalf("acquired %+v", ctl)
	}
	_, err = m.Acquire("conn-2", protocol.ResourceController{ConnectionID: "conn-2"}, a.Ref)
	wantCode(t, err, protocol.CodeOperationConflict)
	again, err := m.Acquire("conn-1", protocol.ResourceController{ConnectionID: "conn-1"}, a.Ref)
	if err != nil || again.ControllerID != ctl.ControllerID {
		t.Fatalf("acquiring again from the same connection: %+v, %v", again, err)
	}
	// The controller of a cannot write to b.
	_, err = m.Control("conn-1", protocol.ControlInput{SessionID: "s1", Ref: b.Ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "x"})
	wantCode(t, err, protocol.CodeOperationConflict)
	// Another connection cannot use or release it.
	_, err = m.Control("conn-2", protocol.ControlInput{SessionID: "s1", Ref: a.Ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "x"})
	wantCode(t, err, protocol.CodeOperationConflict)
	wantCode(t, m.Release("conn-2", a.Ref, ctl.ControllerID), protocol.CodeOperationConflict)

	if err := m.Release("conn-1", a.Ref, ctl.ControllerID); err != nil {
		t.Fatal(err)
	}
	other, err := m.Acquire("conn-2", protocol.ResourceController{ConnectionID: "conn-2"}, a.Ref)
	if err != nil || other.ControllerID == ctl.ControllerID {
		t.Fatalf("after the release another connection acquired %+v, %v", other, err)
	}
	// A shell run has no controller.
	sh := start(t, m, StartInput{LaunchID: "l3", Command: "sleep 1000"})
	_, err = m.Acquire("conn-1", protocol.ResourceController{ConnectionID: "conn-1"}, sh.Ref)
	wantCode(t, err, protocol.CodeOperationConflict)
}

func acquire(t *testing.T, m *Manager, conn, ref string) string {
	t.Helper()
	ctl, err := m.Acquire(conn, protocol.ResourceController{ConnectionID: conn}, ref)
	if err != nil {
		t.Fatal(err)
	}
	return ctl.ControllerID
}

func control(m *Manager, conn, ref, id string, seq uint64, data string) error {
	_, err := m.Control(conn, protocol.ControlInput{SessionID: "s1", Ref: ref, ControllerID: id, Sequence: seq, Data: data})
	return err
}

// Seed 004: controller input must follow the controller's sequence; and a
// retried control with the same sequence and input replays its result
// while different input conflicts.
func TestControlFollowsTheSequenceAndARetryIsAnsweredWithoutWritingTwice(t *testing.T) {
	m, s, _ := newManager(t)
	p := start(t, m, StartInput{LaunchID: "l1", Command: "stty -echo; echo ready; cat", PTY: true})
	s.printed(t, p.Ref, "ready")
	id := acquire(t, m, "conn-1", p.Ref)

	wantCode(t, control(m, "conn-1", p.Ref, id, 2, "early\n"), protocol.CodeOperationConflict)
	if err := control(m, "conn-1", p.Ref, id, 1, "one\n"); err != nil {
		t.Fatal(err)
	}
	s.printed(t, p.Ref, "one")
	if err := control(m, "conn-1", p.Ref, id, 1, "one\n"); err != nil {
		t.Fatalf("a retry of sequence 1: %v", err)
	}
	wantCode(t, control(m, "conn-1", p.Ref, id, 1, "other\n"), protocol.CodeOperationConflict)
	wantCode(t, control(m, "conn-1", p.Ref, id, 3, "late\n"), protocol.CodeOperationConflict)
	if err := control(m, "conn-1", p.Ref, id, 2, "two\n"); err != nil {
		t.Fatal(err)
	}
	s.printed(t, p.Ref, "two")
	if n := s.count(p.Ref, "one"); n != 1 {
		t.Fatalf("cat printed \"one\" %d times, want once: the retry was written again", n)
	}
	for _, never := range []string{"early", "other", "late"} {
		if s.count(p.Ref, never) != 0 {
			t.Fatalf("a refused call wrote %q", never)
		}
	}
}

// Seed 004: the control replay cache is bounded and forgets released
// controllers.
func TestTheControlReplayCacheIsBoundedAndForgetsReleasedControllers(t *testing.T) {
	m, _, _ := newManager(t)
	m.maxReplays = 2
	var ptys, ids []string
	for i := range 3 {
		p := start(t, m, StartInput{LaunchID: fmt.Sprint("l", i), Command: "stty -echo; cat >/dev/null", PTY: true})
		ptys = append(ptys, p.Ref)
		ids = append(ids, acquire(t, m, "conn-1", p.Ref))
		if err := control(m, "conn-1", p.Ref, ids[i], 1, "x"); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	kept := len(m.replays)
	m.mu.Unlock()
	if kept != 2 {
		t.Fatalf("%d replays kept, want the bound, 2", kept)
	}
	// The oldest was forgotten: its retry is out of sequence now.
	wantCode(t, control(m, "conn-1", ptys[0], ids[0], 1, "x"), protocol.CodeOperationConflict)
	// The newest is answered again.
	if err := control(m, "conn-1", ptys[2], ids[2], 1, "x"); err != nil {
		t.Fatalf("retrying the newest call: %v", err)
	}
	// A released controller's last call is forgotten with it.
	if err := m.Release("conn-1", ptys[2], ids[2]); err != nil {
		t.Fatal(err)
	}
	wantCode(t, control(m, "conn-1", ptys[2], ids[2], 1, "x"), protocol.CodeOperationConflict)
}

// Seed 004: a controller is released when its connection closes, its
// resource exits, or its sequence space ends.
func TestAControllerIsReleasedWhenItsConnectionClosesItsResourceExitsOrItsSequencesEnd(t *testing.T) {
	m, s, _ := newManager(t)
	m.maxSequence = 2
	p := start(t, m, StartInput{LaunchID: "l1", Command: "stty -echo; cat >/dev/null", PTY: true})

	id := acquire(t, m, "conn-1", p.Ref)
	m.ReleaseConnections("conn-1")
	wantCode(t, control(m, "conn-1", p.Ref, id, 1, "x"), protocol.CodeOperationConflict)
	id = acquire(t, m, "conn-2", p.Ref) // free again

	if err := control(m, "conn-2", p.Ref, id, 1, "x"); err != nil {
		t.Fatal(err)
	}
	if err := control(m, "conn-2", p.Ref, id, 2, "x"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, control(m, "conn-2", p.Ref, id, 3, "x"), protocol.CodeOperationConflict)
	id = acquire(t, m, "conn-3", p.Ref) // the last sequence released it

	q := start(t, m, StartInput{LaunchID: "l2", Command: "read line; exit 0", PTY: true})
	qid := acquire(t, m, "conn-3", q.Ref)
	if err := control(m, "conn-3", q.Ref, qid, 1, "bye\n"); err != nil {
		t.Fatal(err)
	}
	s.exited(t, q.Ref)
	m.mu.Lock()
	_, held := m.controllers[qid]
	m.mu.Unlock()
	if held {
		t.Fatal("the controller of an exited PTY is still held")
	}
	wantCode(t, control(m, "conn-3", q.Ref, qid, 2, "x"), protocol.CodeOperationConflict)
	_ = id
}

// Seed 004: the agent cannot write to a PTY that a client controls.
func TestTheAgentCannotWriteToAPTYAClientControls(t *testing.T) {
	m, s, _ := newManager(t)
	p := start(t, m, StartInput{LaunchID: "l1", Command: "stty -echo; cat", PTY: true})
	if err := m.Write(p.Ref, []byte("agent-1\n")); err != nil {
		t.Fatal(err)
	}
	s.printed(t, p.Ref, "agent-1")
	id := acquire(t, m, "conn-1", p.Ref)
	wantCode(t, m.Write(p.Ref, []byte("agent-2\n")), protocol.CodeOperationConflict)
	if err := m.Release("conn-1", p.Ref, id); err != nil {
		t.Fatal(err)
	}
	if err := m.Write(p.Ref, []byte("agent-3\n")); err != nil {
		t.Fatal(err)
	}
	s.printed(t, p.Ref, "agent-3")
	if s.count(p.Ref, "agent-2") != 0 {
		t.Fatal("the refused write reached the PTY")
	}
}

// Seed 004: a controller acquire result fits the wire limit by trimming the
// oldest PTY output.
func TestAControllerAcquireResultFitsTheWireLimitByTrimmingTheOldestOutput(t *testing.T) {
	// A real PTY's acquire carries its whole screen when it fits.
	m, s, _ := newManager(t)
	p := start(t, m, StartInput{LaunchID: "l1", Command: "echo first; echo last; sleep 1000", PTY: true})
	s.printed(t, p.Ref, "last")
	res, err := m.Acquire("conn-1", protocol.ResourceController{ConnectionID: "conn-1"}, p.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Screen, "first\r\nlast") {
		t.Fatalf("the acquired screen %q lacks the output", res.Screen)
	}
	// A screen of 250 rows of 300 cells, each in a colour of its own, is
	// past a megabyte encoded: its oldest rows are left out.
	var lines []string
	for i := range 250 {
		var b strings.Builder
		for j := range 300 {
			fmt.Fprintf(&b, "\x1b[38;5;%dm%d", 16+(i+j)%200, j%10)
		}
		fmt.Fprintf(&b, "|row%d", i)
		lines = append(lines, b.String())
	}
	if whole, _ := json.Marshal(drawLines(lines, "")); len(whole) <= protocol.MaxMessageBytes {
		t.Fatal("the screen is too small to test the bound")
	}
	res = fitScreen(res, lines, "\x1b[250;1H")
	b, _ := json.Marshal(res)
	if len(b) > protocol.MaxMessageBytes-acquireOverhead {
		t.Fatalf("the acquire result is %d bytes, past the wire limit", len(b))
	}
	if !strings.Contains(res.Screen, "|row249\x1b[250;1H") || strings.Contains(res.Screen, "|row0\r\n") {
		t.Fatal("the trimmed screen does not keep the newest rows and the cursor, without the oldest")
	}
	if len(b) < protocol.MaxMessageBytes/4 {
		t.Fatalf("the trimmed result is %d bytes: more was left out than the bound needs", len(b))
	}
}

// Seed 004: draining refuses new runs and terminates every live resource.
func TestDrainingRefusesNewRunsAndTerminatesEveryLiveResource(t *testing.T) {
	m, _, _ := newManager(t)
	a := start(t, m, StartInput{LaunchID: "l1", Command: "sleep 1000"})
	b := start(t, m, StartInput{LaunchID: "l2", Command: "trap '' TERM; sleep 1000 & wait; wait", PTY: true})
	id := acquire(t, m, "conn-1", b.Ref)
	m.Drain()
	for _, ref := range []string{a.Ref, b.Ref} {
		r, err := m.Get(ref)
		if err != nil || r.State != protocol.ResourceExited {
			t.Fatalf("%s after the drain: %+v, %v", ref, r, err)
		}
	}
	_, err := m.Start(StartInput{LaunchID: "l3", Command: "true"})
	wantCode(t, err, protocol.CodeDraining)
	wantCode(t, control(m, "conn-1", b.Ref, id, 1, "x"), protocol.CodeOperationConflict)
	if m.Running() != 0 {
		t.Fatal("resources still run after the drain")
	}
}

func TestARefusedAdmissionStartsNothing(t *testing.T) {
	archived := protocol.Errorf(protocol.CodeSessionArchived, "session s1 is archived")
	m, _, _ := newManager(t, func(c *Config) { c.Admit = func() (string, error) { return "", archived } })
	_, err := m.Start(StartInput{LaunchID: "l1", Command: "true"})
	wantCode(t, err, protocol.CodeSessionArchived)
	page, _ := m.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if len(page.Resources) != 0 {
		t.Fatalf("a refused start left %s", refs(page.Resources))
	}
}

func TestBadInputNamesWhatIsWrongAndDisturbsNothing(t *testing.T) {
	m, s, _ := newManager(t)
	p := start(t, m, StartInput{LaunchID: "l1", Command: "stty -echo; while read l; do echo size $(stty size); done", PTY: true})
	id := acquire(t, m, "conn-1", p.Ref)
	for _, in := range []protocol.ControlInput{
		{SessionID: "s1", Ref: p.Ref, ControllerID: id, Sequence: 1, Cols: 100000},
		{SessionID: "s1", Ref: p.Ref, ControllerID: id, Sequence: 1, Rows: -1},
		{SessionID: "s1", Ref: p.Ref, ControllerID: id, Sequence: 0},
		{SessionID: "s1", Ref: p.Ref, ControllerID: id, Sequence: 1, Data: strings.Repeat("x", protocol.MaxControlDataBytes+1)},
	} {
		if err := in.Validate(); err == nil {
			t.Fatalf("%+v passed validation", in)
		}
	}
	wantCode(t, control(m, "conn-1", "pty-9", id, 1, "x"), protocol.CodeNotFound)
	wantCode(t, control(m, "conn-1", p.Ref, "ctl-99", 1, "x"), protocol.CodeOperationConflict)
	// The PTY still works for its controller, and resizes.
	if _, err := m.Control("conn-1", protocol.ControlInput{SessionID: "s1", Ref: p.Ref, ControllerID: id, Sequence: 1, Data: "\n", Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	s.printed(t, p.Ref, "size 30 100")
}

// Seed 004: a started shell runs in the session's working directory,
// admitted atomically with the header read. Here the session moves
// between starts (a relocation, say): each resource runs where the
// admission that started it said, whatever moved meanwhile.
func TestAStartedShellRunsInTheDirectoryItsAdmissionRead(t *testing.T) {
	base := t.TempDir()
	var mu sync.Mutex
	moves := 0
	m, _, _ := newManager(t, func(c *Config) {
		c.Admit = func() (string, error) {
			mu.Lock()
			defer mu.Unlock()
			moves++
			dir := filepath.Join(base, fmt.Sprint("place-", moves))
			return dir, os.Mkdir(dir, 0o755)
		}
	})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := m.Start(StartInput{LaunchID: fmt.Sprint("l", i), Command: "pwd"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	m.mu.Lock()
	all := slices.Clone(m.order)
	m.mu.Unlock()
	for _, r := range all {
		<-r.drained // its output is all read
	}
	page, err := m.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil || len(page.Resources) != 8 {
		t.Fatalf("listed %d resources, %v", len(page.Resources), err)
	}
	seen := map[string]bool{}
	for _, r := range page.Resources {
		out, _, err := m.Output(r.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != r.Cwd {
			t.Fatalf("%s was admitted in %s and ran in %q", r.Ref, r.Cwd, got)
		}
		if seen[r.Cwd] {
			t.Fatalf("two resources admitted in %s", r.Cwd)
		}
		seen[r.Cwd] = true
	}
}

// A PTY's output reaches its watchers before its log: a log write that
// waits on the file system does not hold a key's echo back.
func TestAPTYsOutputReachesItsWatchersBeforeItsLog(t *testing.T) {
	var mu sync.Mutex
	logPath := ""              // guarded by mu: set once the PTY has started
	var passed strings.Builder // guarded by mu: the output passed on so far
	var early []string         // guarded by mu: pieces in the log before they were passed on
	m, s, dir := newManager(t, func(c *Config) {
		out := c.OnOutput
		c.OnOutput = func(ref string, seq uint64, data []byte) {
			mu.Lock()
			if logPath != "" {
				if logged, _ := os.ReadFile(logPath); len(logged) > passed.Len() {
					early = append(early, string(data))
				}
			}
			passed.Write(data)
			mu.Unlock()
			out(ref, seq, data)
		}
	})
	r := start(t, m, StartInput{LaunchID: "l1", Command: "echo first-piece; read x; echo second-piece; read x; echo third-piece; sleep 1000", PTY: true})
	s.printed(t, r.Ref, "first-piece")
	mu.Lock()
	logPath = filepath.Join(dir, "resources", r.Ref+".log")
	mu.Unlock()
	m.mu.Lock()
	res := m.byRef[r.Ref]
	m.mu.Unlock()
	for _, next := range []string{"second-piece", "third-piece"} {
		if err := m.write(res, []byte("go\n")); err != nil {
			t.Fatal(err)
		}
		s.printed(t, r.Ref, next)
	}
	mu.Lock()
	defer mu.Unlock()
	if logged, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(logged), "third-piece") {
		t.Fatalf("the log holds %q (%v), not the output", logged, err)
	}
	if len(early) > 0 {
		t.Fatalf("output was in the log before its watchers had it: %q", early)
	}
}
