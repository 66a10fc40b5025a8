package sessions_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// A shell run's output is read from its log by the owner and by an
// observing guest, live: a read that waits answers with what the run
// writes next, and the last says the output is complete once the run
// has ended. Control characters reach the reader as the text they are.
// A ref the session has not is not_found, and an offset past the end
// invalid_request.
func TestAShellRunsOutputIsReadLiveByAWaitingReader(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s := createSession(t, w.owner, w.work)
	fifo := filepath.Join(w.work, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	run, err := client.Call(ctx, w.owner, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: s.SessionID, LaunchID: "l1", Command: `printf 'first \033[31mred\033[0m\n'; read line < go; printf '%s\n' "$line"`,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := w.share(t, s.SessionID, protocol.GrantObserve)
	guest := w.guestConn(t, g.Token)

	read := func(c *client.Conn, in protocol.OutputReadInput) protocol.ResourceOutput {
		t.Helper()
		in.SessionID, in.Ref = s.SessionID, run.Ref
		out, err := client.Call(ctx, c, protocol.OpRuntimeResourceOutputRead, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := read(guest, protocol.OutputReadInput{Wait: true})
	if first.Data != "first \x1b[31mred\x1b[0m\n" || first.Offset != 0 || first.NextOffset != int64(len(first.Data)) || first.Complete || first.Resource.State != protocol.ResourceRunning {
		t.Fatalf("the guest's first read: %+v", first)
	}

	// A read that waits answers with what the run writes next.
	next := make(chan protocol.ResourceOutput, 1)
	go func() {
		out, err := client.Call(ctx, guest, protocol.OpRuntimeResourceOutputRead, protocol.OutputReadInput{SessionID: s.SessionID, Ref: run.Ref, Offset: &first.NextOffset, Wait: true})
		if err != nil {
			t.Error(err)
		}
		next <- out
	}()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("second\n")
	f.Close()
	second := <-next
	if second.Offset != first.NextOffset || !strings.HasPrefix("second\n", second.Data) || second.Data == "" {
		t.Fatalf("the waiting read: %+v", second)
	}
	// Reads go on until the output is complete.
	got := second.Data
	for at := second.NextOffset; ; {
		out := read(w.owner, protocol.OutputReadInput{Offset: &at, Wait: true})
		got += out.Data
		at = out.NextOffset
		if out.Complete {
			if out.Resource.State != protocol.ResourceExited || out.NextOffset != out.Size {
				t.Fatalf("the last read: %+v", out)
			}
			break
		}
	}
	if got != "second\n" {
		t.Fatalf("read after the first: %q", got)
	}
	if whole := read(w.owner, protocol.OutputReadInput{Offset: new(int64)}); whole.Data != first.Data+"second\n" || !whole.Complete {
		t.Fatalf("the whole output: %+v", whole)
	}
	if tail := read(guest, protocol.OutputReadInput{MaxBytes: 7}); tail.Data != "second\n" || tail.Offset != first.NextOffset {
		t.Fatalf("the last 7 bytes: %+v", tail)
	}

	_, err = client.Call(ctx, guest, protocol.OpRuntimeResourceOutputRead, protocol.OutputReadInput{SessionID: s.SessionID, Ref: "shell-9"})
	wantCode(t, err, protocol.CodeNotFound)
	past := int64(1000)
	_, err = client.Call(ctx, w.owner, protocol.OpRuntimeResourceOutputRead, protocol.OutputReadInput{SessionID: s.SessionID, Ref: run.Ref, Offset: &past})
	wantCode(t, err, protocol.CodeInvalidRequest)
	other := createSession(t, w.owner, w.work)
	_, err = client.Call(ctx, guest, protocol.OpRuntimeResourceOutputRead, protocol.OutputReadInput{SessionID: other.SessionID, Ref: run.Ref})
	wantCode(t, err, protocol.CodeNotFound)
}
