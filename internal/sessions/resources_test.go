package sessions_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/protocol"
)

// ptyWatch reads one subscription's frames of a PTY: the text it would
// show, and whether its first frame was the screen.
type ptyWatch struct {
	t       *testing.T
	w       *rawFeed
	ref     string
	text    strings.Builder
	frames  []protocol.RuntimeResourcePtyData
	updates []protocol.Resource
	// skips, when set, accepts a screen again: the host skips a watcher
	// that lags by more than its backlog to the PTY's screen.
	skips bool
}

// until reads frames until the PTY's output shows want.
func (p *ptyWatch) until(want string) {
	p.t.Helper()
	for !strings.Contains(p.text.String(), want) {
		f, err := p.w.next()
		if err != nil {
			have := p.text.String()
			p.t.Fatalf("waiting for %q (have %d bytes, ending %q): %v", want, len(have), have[max(0, len(have)-200):], err)
		}
		switch f.Kind {
		case protocol.KindRuntimeResourcePtyData:
			var d protocol.RuntimeResourcePtyDataFrame
			if err := f.Decode(&d); err != nil {
				p.t.Fatal(err)
			}
			if d.Ref != p.ref {
				p.t.Fatalf("output of %s reached a subscription that chose %s", d.Ref, p.ref)
			}
			if n := len(p.frames); n > 0 && d.PtySequence <= p.frames[n-1].PtySequence {
				p.t.Fatalf("pty sequence %d follows %d", d.PtySequence, p.frames[n-1].PtySequence)
			}
			if len(p.frames) == 0 && !d.Screen {
				p.t.Fatalf("the first frame of %s is not its screen: %+v", p.ref, d.RuntimeResourcePtyData)
			}
			if len(p.frames) > 0 && d.Screen && !p.skips {
				p.t.Fatalf("a second screen of %s reached a subscription that had one", p.ref)
			}
			p.frames = append(p.frames, d.RuntimeResourcePtyData)
			p.text.WriteString(d.Data)
		case protocol.KindRuntimeResourceUpdate:
			var u protocol.RuntimeResourceUpdateFrame
			var r protocol.Resource
			if err := f.Decode(&u); err != nil || json.Unmarshal(u.Resource, &r) != nil {
				p.t.Fatalf("an update frame: %s", f.Raw)
			}
			p.updates = append(p.updates, r)
		}
	}
}

// rawFeed is a subscription of a connection of its own, read by hand: while
// its reader lags, what the host writes to it waits in the socket, so the
// reader is given every frame the host sends, as the host sends it.
type rawFeed struct {
	rc     *rawConn
	asked  int
	queued []client.Frame // pushed frames read while a response was awaited
}

// request runs operation with input on the feed's connection and returns
// its result, keeping the pushed frames that came before it.
func (f *rawFeed) request(operation string, input any) json.RawMessage {
	t := f.rc.t
	t.Helper()
	f.asked++
	id := fmt.Sprintf("r%d", f.asked)
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	f.rc.send(fmt.Sprintf(`{"requestId":%q,"operation":%q,"input":%s}`, id, operation, in))
	for {
		line := f.rc.read()
		hf, err := protocol.DecodeHostFrame([]byte(line))
		switch {
		case err != nil:
			t.Fatalf("a frame of the host: %v: %s", err, line)
		case hf.Response == nil:
			f.queued = append(f.queued, client.Frame{Pushed: hf.Pushed, Raw: json.RawMessage(line)})
		case hf.Response.RequestID != id || !hf.Response.OK:
			t.Fatalf("%s: answered %s", operation, line)
		default:
			return hf.Response.Result
		}
	}
}

// next returns the next pushed frame.
func (f *rawFeed) next() (client.Frame, error) {
	if len(f.queued) > 0 {
		fr := f.queued[0]
		f.queued = f.queued[1:]
		return fr, nil
	}
	f.rc.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	line, err := f.rc.r.ReadBytes('\n')
	if err != nil {
		return client.Frame{}, err
	}
	hf, err := protocol.DecodeHostFrame(line)
	if err != nil || hf.Response != nil {
		return client.Frame{}, fmt.Errorf("not a pushed frame (%v): %s", err, line)
	}
	return client.Frame{Pushed: hf.Pushed, Raw: line}, nil
}

// followSession opens a ready subscription of c to session id, and
// returns it with its id.
func followSession(t *testing.T, c *client.Conn, id string) (*client.Watcher, string) {
	t.Helper()
	ctx := agentdtest.Context(t)
	in := protocol.SubscriptionOpenInput{SessionID: id, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}}
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, in)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(open.SubscriptionID)
	t.Cleanup(w.Close)
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	return w, open.SubscriptionID
}

// watchPTY connects to the host at endpoint, subscribes to session id and
// chooses its PTY ref, on a rawFeed.
func watchPTY(t *testing.T, endpoint, id, ref string) *ptyWatch {
	t.Helper()
	f := &rawFeed{rc: dialRaw(t, endpoint)}
	var open protocol.SubscriptionOpenResult
	raw := f.request(string(protocol.OpSubscriptionOpen), protocol.SubscriptionOpenInput{SessionID: id, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
	if err := json.Unmarshal(raw, &open); err != nil {
		t.Fatal(err)
	}
	f.request(string(protocol.OpSubscriptionReady), protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID})
	f.request(string(protocol.OpSubscriptionPtyInterestSet), protocol.PtyInterestInput{SubscriptionID: open.SubscriptionID, Refs: []string{ref}})
	return &ptyWatch{t: t, w: f, ref: ref}
}

// createSession creates a session of work on c.
func createSession(t *testing.T, c *client.Conn, work string) protocol.Session {
	t.Helper()
	s, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sessionWithPTY creates a session of work on c whose PTY runs command.
func sessionWithPTY(t *testing.T, c *client.Conn, work, command string) (protocol.Session, protocol.Resource) {
	t.Helper()
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	pty, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: s.SessionID, LaunchID: "l1", Command: command, PTY: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, pty
}

func wantCode(t *testing.T, err error, code protocol.Code) {
	t.Helper()
	var re *client.RemoteError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("error %v, want %s", err, code)
	}
}

// A PTY one client starts is seen by every client that chooses it, each
// from its screen as it is then; one client at a time types into it, and
// its control ends with its connection.
func TestAPTYIsSeenByEveryClientThatChoosesItAndControlledByOneAtATime(t *testing.T) {
	h, a, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s := createSession(t, a, work)
	start := protocol.ResourceStartInput{SessionID: s.SessionID, LaunchID: "l1", Command: "stty -echo; echo ready in $PWD; cat", PTY: true, Cols: 60, Rows: 12}
	pty, err := client.Call(ctx, a, protocol.OpRuntimeResourceStart, start)
	if err != nil {
		t.Fatal(err)
	}
	if pty.Kind != protocol.ResourcePTY || pty.State != protocol.ResourceRunning || pty.Cwd != work {
		t.Fatalf("started %+v", pty)
	}
	again, err := client.Call(ctx, a, protocol.OpRuntimeResourceStart, start)
	if err != nil || again.Ref != pty.Ref {
		t.Fatalf("a retry of the launch answered %+v, %v", again, err)
	}
	wa := watchPTY(t, h.Endpoint(), s.SessionID, pty.Ref)
	wa.until("ready in " + work)

	ctl, err := client.Call(ctx, a, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ctl.Screen, "ready in") || ctl.NextSequence != 1 {
		t.Fatalf("acquired %+v", ctl)
	}
	control := func(c *client.Conn, seq uint64, data string) error {
		_, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
			SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: seq, Data: data,
		})
		return err
	}
	if err := control(a, 1, "first line\n"); err != nil {
		t.Fatal(err)
	}
	wa.until("first line")

	// A second client chooses the PTY later: its first frame is the
	// screen, with what was typed already; the first client gets no
	// second screen, only the output that follows.
	b := h.Connect(t)
	wb := watchPTY(t, h.Endpoint(), s.SessionID, pty.Ref)
	wb.until("first line")
	if !wb.frames[0].Screen || !strings.Contains(wb.frames[0].Data, "first line") {
		t.Fatalf("the second client's first frame: %+v", wb.frames[0])
	}
	_, err = client.Call(ctx, b, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	wantCode(t, err, protocol.CodeOperationConflict)
	wantCode(t, control(b, 2, "not yours\n"), protocol.CodeOperationConflict)

	if err := control(a, 2, "second line\n"); err != nil {
		t.Fatal(err)
	}
	wa.until("second line")
	wb.until("second line")
	if strings.Contains(wb.text.String(), "not yours") {
		t.Fatal("a client that does not control the PTY wrote to it")
	}

	// The controlling client goes: its control goes with it.
	a.Close()
	deadline := time.Now().Add(agentdtest.Timeout)
	for {
		_, err := client.Call(ctx, b, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the PTY is still controlled after its controller's connection closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the release follows the close
	}

	// Stopping it reaches its watcher as the resource's state.
	stopped, err := client.Call(ctx, b, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != protocol.ResourceExited {
		t.Fatalf("stopped %+v", stopped)
	}
	for !exitedIn(wb.updates, pty.Ref) {
		f, err := wb.w.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == protocol.KindRuntimeResourceUpdate {
			var u protocol.RuntimeResourceUpdateFrame
			var r protocol.Resource
			f.Decode(&u)
			json.Unmarshal(u.Resource, &r)
			wb.updates = append(wb.updates, r)
		}
	}
	list, err := client.Call(ctx, b, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: s.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 1 || list.Resources[0].State != protocol.ResourceExited {
		t.Fatalf("listed %+v", list.Resources)
	}
}

// Seed 004: a controller acquire result fits the wire limit by trimming
// the oldest PTY output. A PTY of 300×250 cells, each row full of cells in
// colours of their own, is a screen well past a message encoded; acquired
// through the host from its worker, the result fits in a message, with
// the newest rows and the cursor, without the oldest.
func TestAnAcquireOfAFullStyledScreenFitsTheWireLimit(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	const draw = `stty -echo; awk 'BEGIN {
		for (i = 0; i < 250; i++) {
			printf "row%03d|", i
			for (j = 0; j < 280; j++) printf "\033[38;5;%dm%d", 16 + (i + j) % 200, j % 10
			printf "\033[0m"
			if (i < 249) printf "\r\n"
		}
		printf "END\033[250;5H"
	}'; cat`
	pty, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: s.SessionID, LaunchID: "l1", Command: draw, PTY: true, Cols: 300, Rows: 250,
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref}
	// Acquiring again answers the same controller, with the screen as it
	// is then: asked until the whole drawing is on it.
	var ctl protocol.ControllerAcquireResult
	poll.Until(t, "the drawing on the acquired screen", func() bool {
		ctl, err = client.Call(ctx, c, protocol.OpRuntimeResourceControllerAcquire, ref)
		if err != nil {
			t.Fatalf("acquiring the PTY: %v", err)
		}
		return strings.Contains(ctl.Screen, "END")
	})
	b, err := json.Marshal(ctl)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > protocol.MaxMessageBytes {
		t.Fatalf("the acquire result is %d bytes encoded, past the wire limit of %d", len(b), protocol.MaxMessageBytes)
	}
	if !strings.Contains(ctl.Screen, "row249|") || !strings.HasSuffix(ctl.Screen, "\x1b[250;5H") {
		t.Fatalf("the acquired screen lacks the newest row or the cursor; it ends %q", ctl.Screen[max(0, len(ctl.Screen)-200):])
	}
	if strings.Contains(ctl.Screen, "row000|") {
		t.Fatal("the acquired screen keeps the oldest row: nothing was left out")
	}
	if len(b) < protocol.MaxMessageBytes/2 {
		t.Fatalf("the acquire result is %d bytes: more was left out than the limit needs", len(b))
	}
}

func exitedIn(rs []protocol.Resource, ref string) bool {
	for _, r := range rs {
		if r.Ref == ref && r.State == protocol.ResourceExited {
			return true
		}
	}
	return false
}

// Seed 004: mutations of an archived session fail with session_archived and
// of an unknown session with not_found.
func TestResourceMutationsOfAnArchivedSessionFailAndOfAnUnknownOneAreNotFound(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	r, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: s.SessionID, LaunchID: "l1", Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Call(ctx, c, protocol.OpSessionArchive, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Fatal(err)
	}
	ref := protocol.ResourceRef{SessionID: s.SessionID, Ref: r.Ref}
	for op, call := range map[string]func() error{
		"start": func() error {
			_, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: s.SessionID, LaunchID: "l2", Command: "true"})
			return err
		},
		"stop": func() error { _, err := client.Call(ctx, c, protocol.OpRuntimeResourceStop, ref); return err },
		"acquire": func() error {
			_, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerAcquire, ref)
			return err
		},
		"control": func() error {
			_, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{SessionID: s.SessionID, Ref: r.Ref, ControllerID: "ctl-1", Sequence: 1})
			return err
		},
		"release": func() error {
			_, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerRelease, protocol.ControllerRef{SessionID: s.SessionID, Ref: r.Ref, ControllerID: "ctl-1"})
			return err
		},
	} {
		t.Logf("%s of an archived session", op)
		wantCode(t, call(), protocol.CodeSessionArchived)
	}
	// Reading is not a mutation.
	_, err = client.Call(ctx, c, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: s.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: "nosuchsession", LaunchID: "l3", Command: "true"})
	wantCode(t, err, protocol.CodeNotFound)
}

// Seed 004: a started shell runs in the session's working directory,
// admitted atomically with the header read. Starts race an archive of
// their session: each runs before the archive returns (and is stopped
// with the session's worker) or is refused; once the archive has returned
// and every start has answered, nothing of the session runs, and no
// worker serves it.
func TestNothingStartsInASessionOnceItsArchiveHasReturned(t *testing.T) {
	var homeDir string
	_, c, work := newHostWith(t, func(cfg *sessions.Config) { homeDir = cfg.Home })
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	wait := startUntilRefused(t, c, s.SessionID, protocol.CodeSessionArchived)
	if _, err := client.Call(ctx, c, protocol.OpSessionArchive, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Fatal(err)
	}
	wait()
	if _, err := os.Stat(home.WorkerRegistrationPath(homeDir, s.SessionID)); err == nil {
		t.Fatal("a worker serves the archived session")
	}
	records, _ := filepath.Glob(filepath.Join(homeDir, "sessions", s.SessionID, "resources", "*.json"))
	if len(records) == 0 {
		t.Fatal("no start ran before the archive")
	}
	for _, path := range records {
		b, err := os.ReadFile(path)
		var r protocol.Resource
		if err != nil || json.Unmarshal(b, &r) != nil {
			t.Fatalf("the record %s: %v %q", path, err, b)
		}
		if r.State != protocol.ResourceExited {
			t.Fatalf("%s of the archived session is %s once the archive has returned", r.Ref, r.State)
		}
	}
}

// A start that read the session before its remove began starts no worker
// once the remove has begun: the session's one worker is the one that ran
// the starts before, and once the remove has returned no worker serves
// the session and nothing recreates its folder. Each worker's start is
// counted by the command that runs it.
func TestNothingStartsInASessionOnceItsRemoveHasReturned(t *testing.T) {
	var homeDir, starts string
	_, c, work := newHostWith(t, func(cfg *sessions.Config) {
		homeDir = cfg.Home
		starts = filepath.Join(filepath.Dir(cfg.Home), "starts")
		cfg.WorkerCommand = append([]string{"/bin/sh", "-c", fmt.Sprintf(`echo start >> %q; exec "$@"`, starts), "sh"}, cfg.WorkerCommand...)
	})
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	wait := startUntilRefused(t, c, s.SessionID, protocol.CodeNotFound)
	if _, err := client.Call(ctx, c, protocol.OpSessionRemove, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Fatal(err)
	}
	wait()
	if b, _ := os.ReadFile(starts); strings.Count(string(b), "start\n") != 1 {
		t.Fatalf("workers started for the session: %d, want the one before its remove", strings.Count(string(b), "start\n"))
	}
	if _, err := os.Stat(home.WorkerRegistrationPath(homeDir, s.SessionID)); err == nil {
		t.Fatal("a worker serves the removed session")
	}
	if _, err := os.Stat(filepath.Join(homeDir, "sessions", s.SessionID)); err == nil {
		t.Fatal("the removed session's folder is back")
	}
}

// startUntilRefused starts shell runs in session id from four goroutines,
// each until a start is refused with code, and returns once one start has
// run; the function it returns waits for the four.
func startUntilRefused(t *testing.T, c *client.Conn, id string, code protocol.Code) (wait func()) {
	ctx := agentdtest.Context(t)
	started := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
					SessionID: id, LaunchID: fmt.Sprint("race-", g, "-", i), Command: "sleep 1000",
				})
				var re *client.RemoteError
				switch {
				case err == nil:
					select {
					case started <- struct{}{}:
					default:
					}
				case errors.As(err, &re) && re.Code == code:
					return
				case ctx.Err() != nil:
					t.Error(err)
					return
				}
			}
		})
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("no start ran")
	}
	return wg.Wait
}

// A worker whose session runs a resource is not idle: it stops once the
// resource has ended, not before.
func TestARunningResourceKeepsItsWorker(t *testing.T) {
	h, c, work := newHost(t, 50*time.Millisecond)
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	r, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: s.SessionID, LaunchID: "l1", Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	pid := workerPID(t, h.Home, s.SessionID)
	// Ten idle graces pass with no client watching.
	timer := time.NewTimer(500 * time.Millisecond)
	select {
	case <-timer.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if workerGone(h.Home, s.SessionID)() || workerPID(t, h.Home, s.SessionID) != pid {
		t.Fatal("the worker stopped while its session ran a resource")
	}
	if _, err := client.Call(ctx, c, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: s.SessionID, Ref: r.Ref}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the worker to stop once idle", workerGone(h.Home, s.SessionID))
}

// A PTY that prints megabytes as fast as it can reaches each client that
// watches it in order, none of it changed or repeated: whole while the
// client keeps up, and from its screen again where it fell behind by more
// than its backlog (how fast a client reads on a loaded machine is not
// for a test to decide). The second client reads only once the first has
// it all, so the output it lags on is held for it while the first is
// given the same output and the frames after: what the host holds for
// one subscription is never reused for another's.
func TestAPTYFloodReachesItsWatchersInOrder(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, pty := sessionWithPTY(t, c, work, "stty -echo; read go; seq 1 300000; echo flood-done")
	var ws []*ptyWatch
	for range 2 {
		w := watchPTY(t, h.Endpoint(), s.SessionID, pty.Ref)
		w.skips = true
		w.until("\x1b[2J") // the screen
		ws = append(ws, w)
	}
	ctl, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
		SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "\n",
	}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 1; i <= 300000; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	b.WriteString("flood-done\r\n")
	want := b.String()
	for n, w := range ws {
		w.until("flood-done")
		// The output after the first screen follows on from the flood's
		// start, and that after a later screen from where the screen
		// shows the flood to be: never before where the output before it
		// ended. A screen may come once the flood has printed its last
		// number, with only its end to follow.
		at, skips := 0, 0
		for i := 1; i < len(w.frames); {
			from := at
			if f := w.frames[i]; f.Screen {
				var ok bool
				if from, ok = screenEnd(f.Data, want); !ok || from < at {
					t.Fatalf("watcher %d: frame %d, a screen, does not show the flood from byte %d on: %q", n+1, i, at, f.Data)
				}
				skips++
				i++
			}
			var run strings.Builder
			for ; i < len(w.frames) && !w.frames[i].Screen; i++ {
				run.WriteString(w.frames[i].Data)
			}
			out := run.String()
			if from == 0 {
				out = strings.TrimLeft(out, "\r\n") // the line typed to start it
			}
			if !strings.HasPrefix(want[from:], out) {
				t.Fatalf("watcher %d: %d bytes of the flood's output (from %q) do not follow on from byte %d", n+1, len(out), out[:min(len(out), 40)], from)
			}
			at = from + len(out)
		}
		if end := len(want) - len("\r\n"); at < end {
			t.Fatalf("watcher %d: the flood's output ended at byte %d of %d", n+1, at, end)
		}
		t.Logf("watcher %d was skipped to the screen %d times", n+1, skips)
	}
}

// screenEnd returns where a PTY's screen, drawn after the PTY printed a
// prefix of want, puts its cursor in want: the screen shows the prefix's
// last rows, the cursor's row perhaps in part. It reports false when the
// screen shows no one place of want.
func screenEnd(screen, want string) (int, bool) {
	body, ok := strings.CutPrefix(screen, "\x1b[H\x1b[2J")
	k := strings.LastIndex(body, "\x1b[")
	var row, col int
	if !ok || k < 0 {
		return 0, false
	}
	if _, err := fmt.Sscanf(body[k:], "\x1b[%d;%dH", &row, &col); err != nil {
		return 0, false
	}
	rows := strings.Split(body[:k], "\r\n")
	if row < 1 || row > len(rows) || col < 1 || col-1 > len(rows[row-1]) {
		return 0, false
	}
	shown := strings.Join(append(rows[:row-1:row-1], rows[row-1][:col-1]), "\r\n")
	shown = strings.TrimLeft(shown, "\r\n") // rows above the flood's first
	if shown == "" {
		return 0, true
	}
	// The rows shown start a line of want: where they show it once.
	lines := "\r\n" + want
	j := strings.Index(lines, "\r\n"+shown)
	if j < 0 || j != strings.LastIndex(lines, "\r\n"+shown) {
		return 0, false
	}
	return j + len(shown), true
}

// A client that stops reading while a PTY floods is not closed as a slow
// consumer: the PTY's output it would have lagged on is skipped, and once
// it reads again it gets the PTY's screen, then the output from there.
func TestAWatcherThatLagsOnAPTYIsSkippedToItsScreen(t *testing.T) {
	// Its backlog is small and may wait long: what it holds past 256 KiB
	// is skipped, however slowly a loaded machine floods. The flood, about
	// 6 MB on the wire, is twice what its connection's queue and socket
	// take in besides.
	h, c, work := newHostWith(t, func(cfg *sessions.Config) { cfg.BacklogBytes, cfg.BacklogAge = 256<<10, time.Hour })
	s, pty := sessionWithPTY(t, c, work, "stty -echo; read go; seq 1 600000; echo flood-done")

	// The watcher reads by hand, so it can stop reading.
	rc := dialRaw(t, h.Endpoint())
	request := func(id, line string) frame {
		t.Helper()
		rc.send(line)
		for {
			if f := rc.next(); f.RequestID == id {
				if !f.OK {
					t.Fatalf("%s: %s", id, f.Result)
				}
				return f
			}
		}
	}
	f := request("open", fmt.Sprintf(`{"requestId":"open","operation":"subscription.open","input":{"sessionId":%q,"transcript":{"kind":"none"}}}`, s.SessionID))
	var open protocol.SubscriptionOpenResult
	json.Unmarshal(f.Result, &open)
	request("ready", fmt.Sprintf(`{"requestId":"ready","operation":"subscription.ready","input":{"subscriptionId":%q}}`, open.SubscriptionID))
	request("interest", fmt.Sprintf(`{"requestId":"interest","operation":"subscription.pty_interest.set","input":{"subscriptionId":%q,"refs":[%q]}}`, open.SubscriptionID, pty.Ref))

	// The flood runs to its end while the watcher reads nothing.
	floodToExit(t, c, s.SessionID, pty.Ref)

	// The watcher reads again: it was skipped to a screen somewhere, and its
	// stream goes on to the end, open. (Its first screen, from choosing
	// the PTY, may have come before the interest's answer, or after.)
	skips, output := 0, false
	var text strings.Builder
	for !strings.Contains(text.String(), "flood-done") {
		line := rc.read()
		var f protocol.RuntimeResourcePtyDataFrame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatal(err)
		}
		switch f.Kind {
		case protocol.KindSubscriptionClosed:
			t.Fatalf("the lagging watcher was closed: %s", line)
		case protocol.KindRuntimeResourcePtyData:
			if f.Screen && output {
				skips++
			}
			output = output || !f.Screen
			text.WriteString(f.Data)
		}
	}
	if skips == 0 {
		t.Fatal("no screen came after output: the watcher got the whole flood, so it never lagged and the test shows nothing")
	}
}

// A PTY that exits while a subscriber that reads slowly is skipped ahead
// on it ends, for that subscriber, on its screen: the exit waits for the
// screen the skip owes it, so a client that stops at the exit never ends
// on output the skip tore. The subscriber reads nothing until the PTY has
// exited, and its backlog holds a byte: past its first screen, each piece
// of the flood's output is skipped and the screen asked for again, so
// the flood's last output is skipped too and the PTY exits before the
// screen it owes can come.
func TestAPTYsExitFollowsTheScreenASkipOwes(t *testing.T) {
	h, c, work := newHostWith(t, func(cfg *sessions.Config) { cfg.BacklogBytes, cfg.BacklogAge = 1, time.Hour })
	s, pty := sessionWithPTY(t, c, work, "stty -echo; read go; seq 1 100000; echo flood-done")
	watcher := &rawFeed{rc: dialRaw(t, h.Endpoint())}
	var open protocol.SubscriptionOpenResult
	raw := watcher.request(string(protocol.OpSubscriptionOpen), protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
	if err := json.Unmarshal(raw, &open); err != nil {
		t.Fatal(err)
	}
	sub := protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}
	watcher.request(string(protocol.OpSubscriptionReady), sub)
	watcher.request(string(protocol.OpSubscriptionPtyInterestSet), protocol.PtyInterestInput{SubscriptionID: open.SubscriptionID, Refs: []string{pty.Ref}})

	floodToExit(t, c, s.SessionID, pty.Ref)

	// The watcher reads: what its PTY shows when the exit comes (its last
	// screen and the output after it) is the flood's end.
	var shown strings.Builder
	screens := 0
	for exited := false; !exited; {
		f, err := watcher.next()
		if err != nil {
			t.Fatalf("after %d screens: %v", screens, err)
		}
		switch f.Kind {
		case protocol.KindRuntimeResourcePtyData:
			var d protocol.RuntimeResourcePtyDataFrame
			if err := f.Decode(&d); err != nil {
				t.Fatal(err)
			}
			if d.Screen {
				screens++
				shown.Reset()
			}
			shown.WriteString(d.Data)
		case protocol.KindRuntimeResourceUpdate:
			var u protocol.RuntimeResourceUpdateFrame
			var r protocol.Resource
			if err := f.Decode(&u); err != nil || json.Unmarshal(u.Resource, &r) != nil {
				t.Fatalf("an update frame: %s", f.Raw)
			}
			exited = r.Ref == pty.Ref && r.State == protocol.ResourceExited
		}
	}
	if !strings.Contains(shown.String(), "flood-done") {
		have := shown.String()
		t.Fatalf("the PTY's exit came after %d screens, its last showing %q: not the flood's end", screens, have[max(0, len(have)-200):])
	}
	if screens < 2 {
		t.Fatalf("%d screens came: the watcher was never skipped, so the test shows nothing", screens)
	}

	// Nothing of the PTY follows its exit: its closed frame comes next.
	watcher.request(string(protocol.OpSubscriptionClose), sub)
	for {
		f, err := watcher.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == protocol.KindSubscriptionClosed {
			break
		}
		t.Fatalf("after the PTY's exit: %s", f.Raw)
	}
	t.Logf("the watcher was skipped to the PTY's screen %d times", screens-1)
}

// floodToExit types the line PTY ref of session sessionID waits for
// before its flood, and returns once another client has seen the PTY
// exit, told as its resource's state.
func floodToExit(t *testing.T, c *client.Conn, sessionID, ref string) {
	t.Helper()
	ctx := agentdtest.Context(t)
	states, _ := followSession(t, c, sessionID)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			f, err := states.Next(ctx)
			if err != nil {
				return
			}
			var u protocol.RuntimeResourceUpdateFrame
			var r protocol.Resource
			if f.Kind == protocol.KindRuntimeResourceUpdate && f.Decode(&u) == nil && json.Unmarshal(u.Resource, &r) == nil && r.State == protocol.ResourceExited {
				return
			}
		}
	}()
	ctl, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: sessionID, Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
		SessionID: sessionID, Ref: ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "\n",
	}); err != nil {
		t.Fatal(err)
	}
	<-ended
	if ctx.Err() != nil {
		t.Fatal("the flood never ended")
	}
}
