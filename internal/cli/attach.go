package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

func newAttachCmd(e *env) *cobra.Command {
	var asJSON, create bool
	var cwd, model string
	cmd := &cobra.Command{
		Use:   "attach [SESSION]",
		Short: "Mirror a session live: full-screen on a terminal (ctrl+\\ detaches), its events as lines elsewhere.",
		Long: `Mirror a session live: full-screen on a terminal, its events as lines
elsewhere (or JSON lines with --json). Detaching stops nothing: the session
runs on. Without SESSION, attach picks the current directory's latest
session, offering a choice on a terminal when it has several.

Keys on the full screen:
  enter            send the prompt: a turn of its own, or into the running turn
  alt+enter        queue the prompt as the next turn
  esc              interrupt the running turn now, its running tool killed
  ctrl+c ctrl+c    stop the running turn after its current step
  ctrl+\           detach (ctrl+c twice too, when no turn runs)
  y / n / a        allow, deny, or always allow the call waiting for approval
  tab              open the session's shell runs and PTYs (enter opens one)
  pgup / pgdn      scroll; ctrl+u / ctrl+d half a page, on an empty line
  up / down        scroll a line
Editing the line, as readline:
  ctrl+a / ctrl+e  start / end of the line
  alt+b / alt+f    a word back / forward
  ctrl+w           delete the word before the cursor
  ctrl+u / ctrl+k  delete to the start / to the end of the line
  ctrl+d           delete the character under the cursor`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("attach takes at most one SESSION")
			case create && len(args) == 1:
				return usagef("attach --new starts a session of its own: give no SESSION")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			screen := tui.IsTerminal(e.stdin) && tui.IsTerminal(e.stdout) && !asJSON
			streamOpts := client.SessionOptions{Resources: screen}
			// The newest page of the transcript is read, and the stream
			// opened, while the session is found, for the first frame.
			var first firstScreen
			defer first.wait()
			var early func(context.Context, *client.Conn, string)
			var colours *tui.Colours
			var sigs *tui.Signals
			if screen {
				early = func(ctx context.Context, c *client.Conn, selector string) { first.start(ctx, c, selector, streamOpts) }
				// Inside tmux this asks tmux, a process, and the signals
				// are asked of the runtime's signal thread: meanwhile the
				// session is found.
				colours = tui.DetectColours(e.stdout, nil)
				sigs = tui.NotifySignals()
				defer sigs.Stop()
			}
			id, c, err := chooseSession(ctx, e, args, create, cwd, model, screen, early)
			if err != nil {
				first.close()
				return err
			}
			if screen && first.conn == nil {
				first.start(ctx, c, id, streamOpts)
			}
			f, err := follow(ctx, id, c, streamOpts, first.stream(c, id))
			if err != nil {
				return err
			}
			if screen {
				page := func() *tui.FirstPage { return first.page(c, id) }
				opts := tui.Options{Follower: f, FirstPage: page, Input: e.stdin, Output: e.stdout, Colours: colours, Signals: sigs}
				if in, out, err := ptyTerminal(e); err == nil {
					opts.OpenPTY = func(ctx context.Context, ref string) (string, error) {
						return openPTY(ctx, f.SessionID(), ref, in, out)
					}
					opts.OpenLog = func(ctx context.Context, ref string) (string, error) {
						return viewRunLog(ctx, f.SessionID(), ref, in, out)
					}
				}
				err := tui.Run(ctx, opts)
				if err == nil && ctx.Err() == nil {
					// As tmux says when a client detaches.
					fmt.Fprintf(e.stdout, "[detached (from session %s)]\n", f.SessionID())
				}
				return attachEnded(e, f.SessionID(), err)
			}
			// Said on stderr, so JSON on stdout stays only the session's.
			snap := f.Session().Snapshot()
			fmt.Fprintf(e.stderr, "session %s · %s · %s · %s\n", snap.Session.SessionID, snap.Session.Model, sandboxLabel(snap.Session), snap.Session.Status)
			feed := tui.NewFeed(f.LastRecord())
			feed.OnChange = tui.NewLines(e.stdout).Change
			err = followShown(ctx, e, f, feed, asJSON, jsonDeltas)
			if asJSON {
				return err // a program reads why from the JSON error
			}
			return attachEnded(e, f.SessionID(), err)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print the session's events as JSON lines")
	fl.BoolVar(&create, "new", false, "start a new session of the current directory and attach to it")
	fl.StringVar(&cwd, "cwd", "", "with --new: the session's working directory (default: the current directory)")
	fl.StringVar(&model, "model", "", "with --new: the session's model, provider/model")
	return cmd
}

// attachEnded is what attach does once following session id ended with
// err: a session removed or a host shut down ends an attach as a detach
// does, as tmux's attach ends when its session or server does, with what
// happened said on stderr; any other reason is a failure.
func attachEnded(e *env, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrSessionRemoved), errors.Is(err, client.ErrNotFound):
		fmt.Fprintf(e.stderr, "agentd: session %s was removed\n", id)
	case errors.Is(err, client.ErrHostShutDown):
		fmt.Fprintln(e.stderr, "agentd: the host was shut down")
	default:
		return err
	}
	return nil
}

// firstScreen is what a first frame is drawn from: the newest page of a
// session's transcript and the session's stream, asked for beside the
// requests that find the session.
type firstScreen struct {
	reading, opening sync.WaitGroup
	conn             *client.Conn // where they are asked; nil before start
	// Set once reading and opening are done: nil for what failed.
	newest *tui.FirstPage
	open   *client.Session
}

// start starts reading the page, and opening the stream with opts, of
// session selector on c. The page, which the session's worker reads, is
// the one on the first frame's path: its request is the one to go first,
// and the goroutine started last is the one run first.
func (p *firstScreen) start(ctx context.Context, c *client.Conn, selector string, opts client.SessionOptions) {
	p.conn = c
	p.opening.Go(func() {
		growStack()
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		if s, err := c.OpenSession(ctx, selector, opts); err == nil {
			p.open = s
		}
	})
	p.reading.Go(func() {
		growStack()
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		if page, err := tui.ReadFirstPage(ctx, c, selector); err == nil {
			p.newest = &page
		}
	})
}

// page returns the page once read, when it is session id's, read on c;
// nil when it could not be read, or was read of a session of this home's
// host that another host's named the same.
func (p *firstScreen) page(c *client.Conn, id string) *tui.FirstPage {
	p.reading.Wait()
	if p.newest == nil || p.conn != c || p.newest.Page.SessionID != id {
		return nil
	}
	return p.newest
}

// stream returns the stream once open, when it is session id's, opened on
// c, for the caller to own; nil otherwise, any other stream it opened
// closed.
func (p *firstScreen) stream(c *client.Conn, id string) *client.Session {
	p.opening.Wait()
	s := p.open
	p.open = nil
	if s != nil && (p.conn != c || s.SessionID() != id) {
		s.Close()
		s = nil
	}
	return s
}

// close closes the stream it opened, unless taken: stream closes any not
// opened on the connection it is given.
func (p *firstScreen) close() { p.stream(nil, "") }

// wait waits for what it started to end.
func (p *firstScreen) wait() {
	p.opening.Wait()
	p.reading.Wait()
}

// chooseSession returns the id of the session to attach to: the one
// named, a new one, or the latest of the current directory (a picker on a
// terminal when it has several); with the connection to the host that
// serves it, for the stream to open on. Early, when set, is given a
// session named at once, with the connection to this home's host, before
// it is looked up.
func chooseSession(ctx context.Context, e *env, args []string, create bool, cwd, model string, screen bool, early func(context.Context, *client.Conn, string)) (string, *client.Conn, error) {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if len(args) == 1 {
		var opened func(*client.Conn)
		if early != nil {
			opened = func(c *client.Conn) { early(ctx, c, args[0]) }
		}
		l, err := locateSessionWith(setup, args[0], opened)
		if err != nil {
			return "", nil, err
		}
		return l.session.SessionID, l.conn, nil
	}
	c, err := open(setup)
	if err != nil {
		return "", nil, err
	}
	id, err := func() (string, error) {
		if create {
			s, err := createSession(setup, c, protocol.SessionCreateInput{Cwd: cwd, Model: model})
			return s.SessionID, err
		}
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		here, err := sessionsOf(setup, c, wd)
		if err != nil {
			return "", err
		}
		switch {
		case len(here) == 0:
			return "", fmt.Errorf("no session of %s: `agentd attach --new` starts one", wd)
		case len(here) == 1 || !screen:
			return here[0].SessionID, nil
		}
		cancel()
		s, err := tui.Pick(ctx, here, e.stdin, e.stdout)
		if errors.Is(err, tui.ErrNotPicked) {
			return "", errors.New("no session chosen")
		}
		return s.SessionID, err
	}()
	if err != nil {
		c.Close()
		return "", nil, err
	}
	return id, c, nil
}

// openPTY shows PTY ref of session id on terminal in/out for agentd
// attach, which has let go of the terminal: as agentd pty does, but on
// the terminal's alternate screen, saying what the person should know on
// it, and on a connection of its own, so that the screen's stream waits
// without holding the PTY's output back. It returns what to tell the
// person once the view has ended.
func openPTY(ctx context.Context, id, ref string, in, out *os.File) (string, error) {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	l, err := locateSession(setup, id)
	if err != nil {
		return "", err
	}
	defer l.conn.Close()
	end, err := viewPTY(ctx, l.conn, ptyView{in: in, out: out, mode: attachControl, find: true}, protocol.Resource{SessionID: l.session.SessionID, Ref: ref})
	var note string
	switch {
	case err != nil:
		return "", err
	case end.exited != nil:
		note = fmt.Sprintf("%s exited (%s)", ref, exitOf(*end.exited))
	case end.detached:
		note = fmt.Sprintf("back from %s, which runs on", ref)
	}
	if note != "" && end.watched {
		note += ": it was watched read-only, another client controlling it"
	}
	return note, nil
}

// sessionsOf lists the sessions of directory dir on this home's host, the
// latest active first.
func sessionsOf(ctx context.Context, c *client.Conn, dir string) ([]protocol.Session, error) {
	dir = filepath.Clean(dir)
	here, err := sessionsWhere(ctx, c, func(s protocol.Session) bool { return filepath.Clean(s.Cwd) == dir && !s.Archived })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(here, func(a, b protocol.Session) int { return b.LastActivityAt.Compare(a.LastActivityAt) })
	return here, nil
}

// dialSession connects to the host that serves session id, starting this
// home's host when none runs: after a lost connection, the host that
// replaced the old one.
func dialSession(id string) client.DialFunc {
	return func(ctx context.Context) (*client.Conn, error) {
		l, err := locateSession(ctx, id)
		if err != nil {
			return nil, err
		}
		return l.conn, nil
	}
}

// What --json prints while following a session.
type jsonMode int

const (
	jsonDeltas  jsonMode = iota // every delta (attach)
	jsonRecords                 // the transcript records alone (log)
)

// follow opens a stream of session id that reopens itself, on first, a
// connection to the host that serves it, when there is one; open, when
// set, is the stream opened already on first.
func follow(ctx context.Context, id string, first *client.Conn, opts client.SessionOptions, open *client.Session) (*client.Follower, error) {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	dial := dialSession(id)
	if open != nil {
		return client.Follow(dial, open), nil
	}
	if first != nil {
		later := dial
		dial = func(ctx context.Context) (*client.Conn, error) {
			if c := first; c != nil {
				first = nil
				return c, nil
			}
			return later(ctx)
		}
	}
	return client.FollowSession(setup, dial, id, opts)
}
