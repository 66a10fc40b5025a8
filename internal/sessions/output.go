package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/fswatch"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// outputLook bounds how long a read of a resource's output waits, with
// nothing written to its log, before it looks again at the resource: it
// is woken by the log's writes and by its writer closing it as the
// resource ends (through inotify, where there is one), and looks anyway
// so that no end is missed.
const outputLook = time.Second

// readOutput reads a shell run's or PTY's output from its log in the
// session's folder, as agentd logs does: the resource writes its log
// whatever reads it, and a reader catches up from the file, so no reader
// holds a resource, its worker or another reader up. With Wait, and
// nothing past the offset yet, it waits for the log's next write, the
// resource's end, MaxOutputWait, or the host draining, whichever comes
// first. A resource the worker does not know is its error (not_found,
// invalid_request), before any file is looked at.
func (s *Service) readOutput(ctx context.Context, call *server.Call, in *protocol.OutputReadInput) (protocol.ResourceOutput, error) {
	h, err := s.resolve(in.SessionID)
	if err != nil {
		return protocol.ResourceOutput{}, err
	}
	limit := cmp.Or(in.MaxBytes, protocol.MaxOutputRead)
	path := filepath.Join(s.cat.Dir(h.ID), "resources", in.Ref+".log")
	caller := ctx
	var watch *fswatch.Watcher
	if in.Wait {
		// Ends with the host's drain: a read held over a hand-off would
		// hold the hand-off; the client asks the next host.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.drain, cancel)()
		watch = fswatch.New()
		defer watch.Close()
		watch.File(path)
	}
	deadline := time.Now().Add(protocol.MaxOutputWait)
	for {
		q, err := forward[protocol.ResourceQueryResult](ctx, s, h, &call.Caller, string(protocol.OpRuntimeResourceQuery), &protocol.ResourceQueryInput{SessionID: h.ID, Ref: in.Ref})
		if err != nil {
			return protocol.ResourceOutput{}, err
		}
		if len(q.Resources) != 1 {
			return protocol.ResourceOutput{}, protocol.Errorf(protocol.CodeInternalFailure, "the worker answered %d resources for %s", len(q.Resources), in.Ref)
		}
		r := q.Resources[0]
		// Read after the state: a resource that had ended then has all
		// its output in the log now.
		out, err := readLog(path, in.Offset, limit, r.State != protocol.ResourceRunning)
		if err != nil {
			return protocol.ResourceOutput{}, err
		}
		out.SessionID, out.Ref, out.Resource = h.ID, in.Ref, r
		left := time.Until(deadline)
		if out.Data != "" || out.Complete || !in.Wait || r.State != protocol.ResourceRunning || left <= 0 {
			return out, nil
		}
		if _, err := watch.Wait(ctx, min(outputLook, left)); err != nil {
			if err := caller.Err(); err != nil {
				return protocol.ResourceOutput{}, err
			}
			return out, nil // the host drains: what there is, which is nothing yet
		}
	}
}

// readLog reads at most limit bytes of the log at path from offset (nil:
// its last limit bytes). ended says the resource has ended, so the log is
// whole: its end is then read as it is, a torn character included.
func readLog(path string, offset *int64, limit int, ended bool) (protocol.ResourceOutput, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		// Not written yet: a resource's log is made as it starts.
		f = nil
	} else if err != nil {
		return protocol.ResourceOutput{}, fmt.Errorf("reading the output: %w", err)
	}
	var size int64
	if f != nil {
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return protocol.ResourceOutput{}, fmt.Errorf("reading the output: %w", err)
		}
		size = st.Size()
	}
	from := max(size-int64(limit), 0)
	if offset != nil {
		if *offset > size {
			return protocol.ResourceOutput{}, protocol.InvalidField("input.offset", "is %d, past the output's %d bytes", *offset, size)
		}
		from = *offset
	}
	buf := make([]byte, min(int64(limit), size-from))
	if len(buf) > 0 {
		n, err := f.ReadAt(buf, from)
		if err != nil && !errors.Is(err, io.EOF) {
			return protocol.ResourceOutput{}, fmt.Errorf("reading the output: %w", err)
		}
		buf = buf[:n]
	}
	skip := 0
	if offset == nil {
		// The tail starts on a whole character.
		for skip < len(buf) && skip < utf8.UTFMax && !utf8.RuneStart(buf[skip]) {
			skip++
		}
	}
	keep := len(buf)
	if !ended || from+int64(len(buf)) < size {
		keep = wholeRunes(buf)
	}
	data := buf[skip:max(keep, skip)]
	next := from + int64(max(keep, skip))
	return protocol.ResourceOutput{
		Offset: from + int64(skip), Data: string(data), NextOffset: next, Size: size,
		Complete: ended && next == size,
	}, nil
}

// wholeRunes returns the length of b without a character its end tears.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
