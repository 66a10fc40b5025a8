package sessiontest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// sessionPlace is a home whose host is a real agentd process (this test
// binary), started on demand as the CLI starts it, with real workers.
type sessionPlace struct {
	t            *testing.T
	home, rundir string
	work         string
}

const placeHostID = "t"

func newSessionPlace(t *testing.T) *sessionPlace {
	base := agentdtest.ShortDir(t)
	p := &sessionPlace{t: t, home: filepath.Join(base, "home"), rundir: filepath.Join(base, "run"), work: filepath.Join(base, "work")}
	os.MkdirAll(p.work, 0o755)
	t.Cleanup(func() {
		hosts, _ := activation.Discover(context.Background(), p.rundir)
		for _, h := range hosts {
			syscall.Kill(h.PID, syscall.SIGTERM)
			activation.WaitExited(agentdtest.Context(t), h)
		}
	})
	return p
}

// dial connects to the place's host, starting one when none runs.
func (p *sessionPlace) dial(ctx context.Context) (*client.Conn, error) {
	c, _, _, err := activation.Open(ctx, activation.OpenOptions{Activation: activation.Options{
		Home: p.home, RuntimeDir: p.rundir, HostID: placeHostID,
		Command: []string{os.Args[0], "host"},
		Env:     []string{envAsCLI + "=1", "GORACE=atexit_sleep_ms=0", "AGENTD_WORKER_IDLE_GRACE=1m"},
	}})
	return c, err
}

func (p *sessionPlace) conn() *client.Conn {
	p.t.Helper()
	c, err := p.dial(agentdtest.Context(p.t))
	if err != nil {
		p.t.Fatalf("open: %v", err)
	}
	p.t.Cleanup(func() { c.Close() })
	return c
}

func (p *sessionPlace) newSession(c *client.Conn) string {
	p.t.Helper()
	s, err := client.Call(agentdtest.Context(p.t), c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.work})
	if err != nil {
		p.t.Fatal(err)
	}
	return s.SessionID
}

func startTurn(t *testing.T, c *client.Conn, session, turnID, prompt string) {
	t.Helper()
	if _, err := client.Call(agentdtest.Context(t), c, protocol.OpTurnStart, protocol.TurnStartInput{
		SessionID: session, TurnID: turnID, Content: protocol.Content{Text: prompt}, Approval: protocol.ApprovalAll,
	}); err != nil {
		t.Fatalf("turn.start %s: %v", turnID, err)
	}
}

// untilEnd reads events until turnID's run_end and returns them all.
func untilEnd(t *testing.T, s *client.Session, turnID string) []client.SessionEvent {
	t.Helper()
	ctx := agentdtest.Context(t)
	var evs []client.SessionEvent
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, ev)
		if ev.Delta.Event == protocol.EventRunEnd && ev.Delta.Turn != nil && ev.Delta.Turn.TurnID == turnID {
			return evs
		}
	}
}

// records reads a session's transcript from its home, as the worker wrote it.
func (p *sessionPlace) records(session string) []protocol.TranscriptRecord {
	p.t.Helper()
	f, err := os.Open(filepath.Join(p.home, "sessions", session, "transcript.jsonl"))
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	var out []protocol.TranscriptRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r protocol.TranscriptRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			p.t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestASessionStreamStartsFromItsProjectionAndFollowsATurnToItsEnd(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	// The command runs as one of the session's resources: its state
	// changes come in the same sequence.
	s, err := c.OpenSession(agentdtest.Context(t), id, client.SessionOptions{Resources: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if snap := s.Snapshot(); snap.Session.SessionID != id || snap.RootTurn != nil || s.SessionID() != id {
		t.Fatalf("snapshot %+v", snap)
	}
	startTurn(t, c, id, "t1", "run `echo streamed`")
	evs := untilEnd(t, s, "t1")
	var tool, ran bool
	for i, ev := range evs {
		if i > 0 && ev.Sequence != evs[i-1].Sequence+1 {
			t.Fatalf("frame %d has sequence %d after %d", i, ev.Sequence, evs[i-1].Sequence)
		}
		if ev.Delta.Event == protocol.EventEntryAdded && (ev.Record == nil || ev.Record.Seq == 0) {
			t.Fatalf("entry_added without its record: %s", ev.Raw)
		}
		if ev.Delta.Event == protocol.EventToolCallEnd && ev.Delta.ToolCall != nil {
			tool = true
		}
		if ev.Resource != nil {
			ran = ran || ev.Resource.Command == "echo streamed" && ev.Resource.State == protocol.ResourceExited
			continue
		}
		var raw protocol.SessionDelta
		if err := json.Unmarshal(ev.Raw, &raw); err != nil || raw.Event != ev.Delta.Event {
			t.Fatalf("raw %s does not match %+v", ev.Raw, ev.Delta)
		}
	}
	if !tool || !ran {
		t.Fatalf("tool call streamed %v, its run's end %v", tool, ran)
	}
	proj := s.Projection()
	if proj.RootTurn == nil || proj.RootTurn.TurnID != "t1" || proj.RootTurn.Status != protocol.TurnCompleted || len(proj.Streams) != 0 {
		t.Fatalf("projection after the turn: %+v", proj)
	}
	if s.LastRecord() != proj.TranscriptSequence || s.LastRecord() == 0 {
		t.Fatalf("last record %d, projection's %d", s.LastRecord(), proj.TranscriptSequence)
	}
}

// TestAResumedStreamDeliversEveryRecordAfterItsSequenceOnceThenTheLiveEvents:
// a stream opened after record N brings every record after N, of every
// type, as entry_added events, then the live ones, which go on with the
// next record: together, the transcript past N, once each, in order.
func TestAResumedStreamDeliversEveryRecordAfterItsSequenceOnceThenTheLiveEvents(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	first, err := c.OpenSession(agentdtest.Context(t), id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startTurn(t, c, id, "t1", "run `echo one`")
	untilEnd(t, first, "t1")
	startTurn(t, c, id, "t2", "run `echo two`")
	untilEnd(t, first, "t2")
	first.Close()
	const resumeAfter = 2 // inside the first turn

	s, err := c.OpenSession(agentdtest.Context(t), id, client.SessionOptions{Resume: true, After: resumeAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	startTurn(t, c, id, "t3", "run `echo three`")
	evs := untilEnd(t, s, "t3")
	if evs[0].Delta.Event != protocol.EventEntryAdded {
		t.Fatalf("a resumed stream began with %s, not the records after its sequence", evs[0].Delta.Event)
	}
	// The live stream ends at run_end; the turn's last record follows it.
	for s.LastRecord() < uint64(len(p.records(id))) {
		ev, err := s.Next(agentdtest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	var got []protocol.TranscriptRecord
	for _, ev := range evs {
		if ev.Record != nil {
			got = append(got, *ev.Record)
		}
	}
	want := p.records(id)[resumeAfter:]
	if len(got) != len(want) {
		t.Fatalf("got records %v, want %d after %d", seqs(got), len(want), resumeAfter)
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func seqs(rs []protocol.TranscriptRecord) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func TestASessionStreamClosedByTheHostEndsWithItsReason(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	f, err := client.FollowSession(agentdtest.Context(t), p.dial, id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionRemove, protocol.SessionRef{SessionID: id}); err != nil {
		t.Fatal(err)
	}
	_, err = f.Next(agentdtest.Context(t))
	var closed *client.ClosedError
	if !errors.As(err, &closed) || closed.Reason != protocol.ClosedSessionRemoved {
		t.Fatalf("Next after the session was removed: %v", err)
	}
	if _, err := f.Session().Next(agentdtest.Context(t)); !errors.As(err, &closed) {
		t.Fatalf("Next again: %v", err)
	}
}

func TestASessionStreamReportsItsContextFirst(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	s, err := c.OpenSession(agentdtest.Context(t), p.newSession(c), client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
	if _, err := s.Next(context.Background()); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a closed connection: %v", err)
	}
	s.Close()
}

// TestAFollowerReopensItsStreamOnTheHostThatReplacesAKilledOne: the host
// dies; the follower says so, starts a new one through its dial, and
// follows the next turn there.
func TestAFollowerReopensItsStreamOnTheHostThatReplacesAKilledOne(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	f, err := client.FollowSession(agentdtest.Context(t), p.dial, id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hosts, err := activation.Discover(agentdtest.Context(t), p.rundir)
	if err != nil || len(hosts) != 1 {
		t.Fatalf("hosts %+v: %v", hosts, err)
	}
	syscall.Kill(hosts[0].PID, syscall.SIGKILL)
	ctx := agentdtest.Context(t)
	ev, err := f.Next(ctx)
	if err != nil || ev.Lost == nil {
		t.Fatalf("first event after the kill: %+v %v", ev, err)
	}
	ev, err = f.Next(ctx)
	if err != nil || !ev.Reopened || ev.Snapshot == nil || ev.Snapshot.Session.SessionID != id {
		t.Fatalf("second event after the kill: %+v %v", ev, err)
	}
	startTurn(t, f.Conn(), id, "t1", "hello again")
	for {
		ev, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Delta.Event == protocol.EventRunEnd {
			if ev.Delta.Turn.Status != protocol.TurnCompleted {
				t.Fatalf("turn %+v", ev.Delta.Turn)
			}
			break
		}
	}
	if f.LastRecord() == 0 {
		t.Fatal("the follower saw no record")
	}
}

// TestTranscriptPagesReadTheTranscriptOlderAndNewer: pages of a session's
// transcript, read older from its end and newer from its start, hold
// every record once.
func TestTranscriptPagesReadTheTranscriptOlderAndNewer(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	s, err := c.OpenSession(agentdtest.Context(t), id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	startTurn(t, c, id, "t1", "run `echo one`")
	untilEnd(t, s, "t1")
	startTurn(t, c, id, "t2", "run `echo two`")
	untilEnd(t, s, "t2")
	want := p.records(id)
	ctx := agentdtest.Context(t)
	read := func(req client.PageRequest, page func(client.PageRequest) (client.TranscriptPage, error)) []protocol.TranscriptRecord {
		var out []protocol.TranscriptRecord
		for {
			pg, err := page(req)
			if err != nil {
				t.Fatal(err)
			}
			if req.Direction == client.PageOlder {
				out = append(pg.Records, out...)
			} else {
				out = append(out, pg.Records...)
			}
			if req.Cursor = pg.NextCursor; req.Cursor == "" {
				return out
			}
		}
	}
	newer := read(client.PageRequest{Direction: client.PageNewer, MaxBytes: 512}, func(req client.PageRequest) (client.TranscriptPage, error) {
		return c.TranscriptPage(ctx, id, req)
	})
	older := read(client.PageRequest{Direction: client.PageOlder, MaxBytes: 512}, func(req client.PageRequest) (client.TranscriptPage, error) {
		return s.TranscriptPage(ctx, req)
	})
	for name, got := range map[string][]protocol.TranscriptRecord{"newer": newer, "older": older} {
		if len(got) != len(want) {
			t.Fatalf("%s pages hold %v, want %d records", name, seqs(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type {
				t.Fatalf("%s pages hold %v", name, seqs(got))
			}
		}
	}
}
