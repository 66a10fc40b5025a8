package sessiontest_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// A PTY stream read only once its PTY has flooded and exited is never
// torn: its output runs on from where it was, or from a screen where the
// stream fell behind (the host skipped it, or its watcher filled and it
// reopened), to the flood's end, and it tells the PTY's exit once,
// however late it reads. How far behind a reader falls on a loaded
// machine is not the test's to decide: it logs how the stream went on.
func TestAPTYStreamReadLateIsWholeOrGoesOnFromAScreenAndTellsTheExit(t *testing.T) {
	p := newSessionPlace(t)
	c, ctl := p.conn(), p.conn()
	id := p.newSession(c)
	ctx := agentdtest.Context(t)
	const lines = 300000
	pty, err := client.Call(ctx, ctl, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: id, LaunchID: "flood", Command: "stty -echo; read go; seq 1 " + strconv.Itoa(lines) + "; echo flood-done", PTY: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.WatchPTY(ctx, id, pty.Ref)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Resource == nil {
			if !ev.Screen {
				t.Fatalf("the stream's first output: %q, not the screen", ev.Data)
			}
			break
		}
	}

	control, err := ctl.AcquirePTY(ctx, id, pty.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := control.Control(ctx, []byte("\n"), 0, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the flood to end", func() bool {
		rs, err := ctl.Resources(ctx, id)
		return err == nil && len(rs) == 1 && rs[0].State == protocol.ResourceExited
	})

	var b strings.Builder
	for i := 1; i <= lines; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	want := b.String()
	runs := []string{""} // the output after each screen
	screens, outputs, last := 0, 0, ""
	// ended reports whether the stream has shown the flood's end: its
	// output ran to it, or the last screen shows it.
	ended := func() bool {
		return strings.Contains(last, "flood-done") || strings.HasSuffix(runs[len(runs)-1], "flood-done\r\n")
	}
	exited := false
	// The PTY's exit comes after the screen a skip is answered with: the
	// stream, read to the exit, has shown the flood's end by then.
	for !exited {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d screens (exited: %v): %v", screens, exited, err)
		}
		switch {
		case ev.Resource != nil && ev.Resource.State == protocol.ResourceExited:
			if exited {
				t.Fatalf("the PTY's exit told twice: %+v", ev.Resource)
			}
			if ev.Resource.ExitCode == nil || *ev.Resource.ExitCode != 0 {
				t.Fatalf("the PTY's exit: %+v", ev.Resource)
			}
			exited = true
		case ev.Resource != nil:
		case ev.Screen:
			screens++
			runs, last = append(runs, ""), string(ev.Data)
		default:
			runs[len(runs)-1] += string(ev.Data)
			last = ""
			outputs++
		}
	}
	if !ended() {
		t.Fatalf("the PTY's exit came after %d screens before the stream showed the flood's end", screens)
	}
	at := 0
	for i, run := range runs {
		run, _, _ = strings.Cut(run, "flood-done")
		if i == 0 {
			run = strings.TrimLeft(run, "\r\n") // the line typed to start it
		}
		j := strings.Index(want[at:], run)
		if j < 0 || i == 0 && j != 0 {
			t.Fatalf("run %d of %d of the output (%d bytes, from %q) does not follow on from byte %d", i+1, len(runs), len(run), run[:min(len(run), 40)], at)
		}
		at += j + len(run)
	}
	t.Logf("%d outputs; the stream went on from a screen %d times", outputs, screens)
}

// A controller moved to its PTY's worker (Controller.Direct) reads the PTY
// there, its screen first, and types there with the sequences it had;
// once its control ends the stream ends as revoked, and the controller's
// calls go through the host again, where they answer as a released
// controller's do.
func TestAControllerOnItsPTYsWorkerTypesAndReadsUntilItsControlEnds(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	ctx := agentdtest.Context(t)
	pty, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: id, LaunchID: "cat", Command: "stty -echo; echo ready; cat", PTY: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := c.AcquirePTY(ctx, id, pty.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Control(ctx, []byte("through the host\n"), 0, 0); err != nil {
		t.Fatal(err)
	}
	s, err := ctl.Direct(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var shown strings.Builder
	until := func(want string) {
		t.Helper()
		for !strings.Contains(shown.String(), want) {
			ev, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("waiting for %q on the worker's stream: %v", want, err)
			}
			if shown.Len() == 0 && len(ev.Data) > 0 && !ev.Screen {
				t.Fatalf("the worker's stream began with %q, not the screen", ev.Data)
			}
			shown.Write(ev.Data)
		}
	}
	until("through the host")
	if err := ctl.Control(ctx, []byte("on the worker\n"), 0, 0); err != nil {
		t.Fatal(err)
	}
	until("on the worker")

	// The control ends as its host connection closes, and the worker's
	// stream with it.
	c.Close()
	for {
		_, err := s.Next(ctx)
		var closed *client.ClosedError
		if errors.As(err, &closed) && closed.Reason == protocol.ClosedAccessRevoked {
			break
		}
		if err != nil {
			t.Fatalf("the worker's stream ended with %v, want %s", err, protocol.ClosedAccessRevoked)
		}
	}
	if err := ctl.Control(ctx, []byte("after\n"), 0, 0); err == nil {
		t.Fatal("a controller whose control ended typed into the PTY")
	}
	other := p.conn()
	if _, err := other.AcquirePTY(ctx, id, pty.Ref); err != nil {
		t.Fatalf("the PTY's control did not end with its connection: %v", err)
	}
}
