package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/fswatch"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// followLook bounds how long logs -f waits, with nothing written to the
// log, before it looks again: it is woken by the log's writes (through
// inotify, where there is one), and looks anyway so that no write is
// missed. The run writes its log whatever reads it, and the reader catches
// up from the file, so nothing waits on a slow reader.
const followLook = time.Second

// tailChunk is how much of a log's end --tail reads at a time, looking
// for the start of its last lines.
const tailChunk = 64 << 10

func newLogsCmd(e *env) *cobra.Command {
	var follow bool
	var tail string
	cmd := &cobra.Command{
		Use:   "logs SESSION REF",
		Short: "Print a shell run's or PTY's output, and follow it with -f.",
		Long: `Print the output a shell run or PTY of a session has written, from its log
(<home>/sessions/<id>/resources/<ref>.log). With --tail N only its last N
lines; with -f (--follow) go on printing what it writes until it ends, or
until Ctrl-C. The run never waits for this command: it writes its log, and
a reader that falls behind catches up from it.

On a terminal, control characters the output holds are shown (as ^[),
never acted on; piped, its bytes are exact.`,
		Example: `  agentd logs 3kq shell-1          what shell-1 has printed so far
  agentd logs 3kq shell-1 -f       and what it prints next, until it ends
  agentd logs 3kq shell-1 --tail 20 -f`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("agentd logs takes a SESSION and a REF (agentd ps SESSION lists the refs), not %d arguments", len(args))
			}
			takesOperands(cmd)
			if tail != "" {
				if n, err := strconv.Atoi(tail); err != nil || n < 0 {
					return usagef("--tail %q: want a number of lines, 0 or more", tail)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			lines := -1
			if tail != "" {
				lines, _ = strconv.Atoi(tail)
			}
			return printLogs(cmd.Context(), e, args[0], args[1], lines, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing the output as it comes, until the run ends or Ctrl-C")
	cmd.Flags().StringVar(&tail, "tail", "", "print only the last `N` lines of what was written before")
	return cmd
}

// runLog is a shell run's or PTY's log, open to read, with the
// connection to the host that serves its session.
type runLog struct {
	l      located
	r      protocol.Resource
	f      *os.File
	stream *client.Session // the session's resource updates; nil unless followed
}

// openRunLog opens the log of resource ref of session selector; with
// follow, a stream of the session's resource updates too, opened before
// the resource's state is read, so that its end, if it comes after, is
// among the stream's updates.
func openRunLog(ctx context.Context, selector, ref string, follow bool) (_ *runLog, err error) {
	l, err := locateSession(ctx, selector)
	if err != nil {
		return nil, err
	}
	rl := &runLog{l: l}
	defer func() {
		if err != nil {
			rl.close()
		}
	}()
	id := l.session.SessionID
	if follow {
		if rl.stream, err = l.conn.OpenSession(ctx, id, client.SessionOptions{Resources: true}); err != nil {
			return nil, err
		}
	}
	page, err := client.Call(ctx, l.conn, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: id, Ref: ref})
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(page.Resources, func(r protocol.Resource) bool { return r.Ref == ref })
	if i < 0 {
		return nil, codedError{protocol.CodeNotFound, fmt.Errorf("session %s has no shell run or PTY %q (`agentd ps %s` lists them)", id, ref, id)}
	}
	rl.r = page.Resources[i]
	if rl.f, err = os.Open(filepath.Join(l.home, "sessions", id, "resources", ref+".log")); err != nil {
		return nil, fmt.Errorf("%s of session %s: its output: %w", ref, id, err)
	}
	return rl, nil
}

func (rl *runLog) close() {
	if rl.f != nil {
		rl.f.Close()
	}
	if rl.stream != nil {
		rl.stream.Close()
	}
	rl.l.conn.Close()
}

// printLogs prints the log of resource ref of session selector: its last
// lines when lines is 0 or more, and with follow what it writes next.
func printLogs(ctx context.Context, e *env, selector, ref string, lines int, follow bool) error {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	rl, err := openRunLog(setup, selector, ref, follow)
	if err != nil {
		return err
	}
	defer rl.close()
	if lines >= 0 {
		if err := seekLastLines(rl.f, lines); err != nil {
			return fmt.Errorf("%s of session %s: its output: %w", ref, rl.r.SessionID, err)
		}
	}
	out := e.stdout
	if tui.IsTerminal(e.stdout) {
		out = visibleWriter{e.stdout}
	}
	if _, err := io.Copy(out, rl.f); err != nil {
		return err
	}
	if !follow || rl.r.State != protocol.ResourceRunning {
		return nil
	}
	ended, err := followLog(ctx, rl.f, out, rl.stream, ref)
	if err != nil || ended == nil {
		return err
	}
	fmt.Fprintf(e.stderr, "agentd: %s ended (%s)\n", ref, exitOf(*ended))
	return nil
}

// viewRunLog shows the output of shell run ref of session id on terminal
// in/out for agentd attach, which has let go of the terminal: on the
// alternate screen, its last screenful, then what it writes while it
// runs, until the person presses q, Ctrl-\ or Ctrl-C; a run that has
// ended says how, and waits for that key. It returns what to tell the
// person once the view has ended.
func viewRunLog(ctx context.Context, id, ref string, in, out *os.File) (string, error) {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	rl, err := openRunLog(setup, id, ref, true)
	if err != nil {
		return "", err
	}
	defer rl.close()
	_, rows := windowSize(out)
	if err := seekLastLines(rl.f, max(rows-2, 1)); err != nil {
		return "", err
	}
	keys, err := readEveryKey(in)
	if err != nil {
		return "", err
	}
	defer keys.restore()
	io.WriteString(out, "\x1b[?1049h\x1b[H\x1b[2J")
	defer io.WriteString(out, "\x1b[?1049l")
	fmt.Fprintf(out, "── %s · %s · q back\n", ref, oneLine(rl.r.Command))
	w := visibleWriter{out}
	if _, err := io.Copy(w, rl.f); err != nil {
		return "", err
	}
	view, leave := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer leave()
		keys.read(view, "q\x1c\x03")
	})
	defer wg.Wait()
	defer leave()
	ended := &rl.r
	if rl.r.State == protocol.ResourceRunning {
		if ended, err = followLog(view, rl.f, w, rl.stream, ref); err != nil {
			return "", err
		}
	}
	if ended == nil {
		return fmt.Sprintf("back from %s, which runs on", ref), nil
	}
	fmt.Fprintf(out, "── %s exited (%s) · q back", ref, exitOf(*ended))
	<-view.Done()
	return fmt.Sprintf("back from %s, which exited (%s)", ref, exitOf(*ended)), nil
}

// readEveryKey is readKeys with Ctrl-C and Ctrl-\ read as keys too, not
// turned into signals.
func readEveryKey(f *os.File) (*keyReader, error) {
	k, err := readKeys(f)
	if err != nil {
		return nil, err
	}
	t := *k.old
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(k.fd, unix.TCSETS, &t); err != nil {
		k.restore()
		return nil, err
	}
	return k, nil
}

// followLog copies what f gains to out until stream reports resource
// ref's end, and returns it; or returns nil when ctx ends (Ctrl-C).
func followLog(ctx context.Context, f *os.File, out io.Writer, stream *client.Session, ref string) (*protocol.Resource, error) {
	// ended is set once the stream has told the run's end, or failed;
	// running is cancelled then, waking the wait for the log's writes.
	var ended struct {
		r   *protocol.Resource
		err error
	}
	running, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	defer func() { stop(); <-done }()
	go func() {
		defer close(done)
		defer stop()
		for {
			ev, err := stream.Next(running)
			if err != nil {
				ended.err = err
				return
			}
			if r := ev.Resource; r != nil && r.Ref == ref && r.State != protocol.ResourceRunning {
				ended.r = r
				return
			}
		}
	}()
	w := fswatch.New()
	defer w.Close()
	w.File(f.Name())
	for {
		if _, err := io.Copy(out, f); err != nil {
			return nil, err
		}
		if _, err := w.Wait(running, followLook); err == nil {
			continue
		}
		// The run ended, or the stream failed, or ctx ended (Ctrl-C).
		<-done
		switch {
		case ctx.Err() != nil:
			return nil, nil
		case ended.err != nil:
			return nil, fmt.Errorf("following %s: %w", ref, ended.err)
		}
		// The run has ended: what it wrote is all in the file.
		_, err := io.Copy(out, f)
		return ended.r, err
	}
}

// seekLastLines moves f's offset to the start of its last n lines; a
// last line without its newline counts as one.
func seekLastLines(f *os.File, n int) error {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil || n == 0 {
		return err
	}
	at, seen := size, 0
	buf := make([]byte, tailChunk)
	for at > 0 {
		read := min(int64(len(buf)), at)
		at -= read
		if _, err := f.ReadAt(buf[:read], at); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		chunk := buf[:read]
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' || at+int64(i) == size-1 {
				continue // the last byte's newline ends the last line
			}
			if seen++; seen == n {
				_, err := f.Seek(at+int64(i)+1, io.SeekStart)
				return err
			}
		}
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// visibleWriter writes output with its control characters shown, never
// acted on (tui.Visible).
type visibleWriter struct{ w io.Writer }

func (v visibleWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		if _, err := io.WriteString(v.w, tui.Visible(string(line))); err != nil {
			return 0, err
		}
		b = b[len(line):]
	}
	return n, nil
}
