package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// open connects to this home's host, starting it if none runs.
func open(ctx context.Context) (*client.Conn, error) {
	c, _, err := openOwn(ctx)
	return c, err
}

// notes is where a command says what it did beside what it was asked
// (a runtime directory's mode set): the command's stderr, set by Main.
var notes io.Writer = io.Discard

// hostModel is the --host-model flag: the default model of a host the
// command starts.
var hostModel string

// openOwn connects to this home's host, starting it if none runs (see
// hostCommand), and returns its registration.
func openOwn(ctx context.Context) (*client.Conn, client.HostInfo, error) {
	return openOwnWith(ctx, protocol.SurfaceCLI, nil)
}

// openOwnAs is openOwn for a client of the given surface.
func openOwnAs(ctx context.Context, surface string) (*client.Conn, client.HostInfo, error) {
	return openOwnWith(ctx, surface, nil)
}

// openOwnWith is openOwnAs with pipeline, when set, given each connection
// whose hello has gone out, for requests that go out behind it
// (client.Options.Pipeline).
func openOwnWith(ctx context.Context, surface string, pipeline func(*client.Conn)) (*client.Conn, client.HostInfo, error) {
	act, err := activation.Resolve(activation.Options{})
	if err != nil {
		return nil, client.HostInfo{}, err
	}
	// Before any host is looked for: a runtime directory the user made
	// loose is tightened, and they are told.
	loose, err := home.PrepareRuntimeDir(act.RuntimeDir)
	if err != nil {
		return nil, client.HostInfo{}, err
	}
	if loose != 0 {
		fmt.Fprintf(notes, "agentd: runtime directory %s had mode %04o; set it to 0700, as it holds only agentd's sockets\n", act.RuntimeDir, loose)
	}
	if act.Command, err = hostCommand(act.Home); err != nil {
		return nil, client.HostInfo{}, err
	}
	opts := activation.OpenOptions{Activation: act, Options: client.Options{Surface: surface, Pipeline: pipeline}}
	if hostModel != "" {
		opts.HostArgs = []string{"--default-model", hostModel}
	}
	c, info, _, err := activation.Open(ctx, opts)
	return c, info, err
}

// hostCommand is the command line of a host a command starts: the host
// executable's "host", logging to the home's log file.
func hostCommand(home string) ([]string, error) {
	exe, err := hostExecutable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary: %w", err)
	}
	return []string{exe, "host", "--log-file", filepath.Join(home, activation.LogFileName)}, nil
}

// callHost runs one operation on this home's host.
func callHost[In, Out any](cmd *cobra.Command, op protocol.Op[In, Out], in In) (Out, error) {
	var out Out
	err := withHost(cmd, func(ctx context.Context, c *client.Conn) (err error) {
		out, err = client.Call(ctx, c, op, in)
		return err
	})
	return out, err
}

// withHost runs fn with a connection to this home's host.
func withHost(cmd *cobra.Command, fn func(ctx context.Context, c *client.Conn) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	c, err := open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// exactArgs takes n operands, which go to the host as they are (see
// takesOperands); names says what they are in the usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s", cmd.CommandPath(), names)
		}
		takesOperands(cmd)
		return nil
	}
}

func newNewCmd(e *env) *cobra.Command {
	var id, cwd, title, model, approve string
	var sb sandboxFlags
	var plugins []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Create a session and print its id.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sb.check(); err != nil {
				return err
			}
			dirs, err := pluginDirs(plugins)
			if err != nil {
				return err
			}
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				s, err := createSession(ctx, c, protocol.SessionCreateInput{
					SessionID: id, Cwd: cwd, Title: title, Model: model, Approval: approve, Sandbox: sb.mode, Network: sb.network, Plugins: dirs,
				})
				if err != nil {
					return err
				}
				warnUnsandboxed(e.stderr, paletteFor(e.stderr), s)
				if asJSON {
					return writeJSON(e.stdout, s)
				}
				fmt.Fprintln(e.stdout, s.SessionID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the session's id (default: a new short one)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the session's working directory (default: the current directory)")
	cmd.Flags().StringVar(&title, "title", "", "the session's title (default: the directory's name)")
	cmd.Flags().StringVar(&model, "model", "", "the session's model, provider/model")
	cmd.Flags().StringVar(&approve, "approve", "", "which tool calls wait for a person: ask, all or read-only")
	sb.add(cmd.Flags())
	addPluginFlag(cmd.Flags(), &plugins)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session as JSON")
	return cmd
}

func createSession(ctx context.Context, c *client.Conn, in protocol.SessionCreateInput) (protocol.Session, error) {
	if in.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return protocol.Session{}, err
		}
		in.Cwd = wd
	}
	var err error
	if in.Cwd, err = filepath.Abs(in.Cwd); err != nil {
		return protocol.Session{}, err
	}
	var s protocol.Session
	s, err = client.Call(ctx, c, protocol.OpSessionCreate, in)
	return s, err
}

// lsFlags are the options of ls.
type lsFlags struct {
	asJSON, archived, allHosts bool
	cwd                        string
	limit                      int
}

func newLsCmd(e *env) *cobra.Command {
	var f lsFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List this home's sessions, the most recently active first.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.limit < 0 {
				return usagef("--limit %d: want 0 (every session) or more", f.limit)
			}
			if f.cwd != "" {
				dir, err := filepath.Abs(f.cwd)
				if err != nil {
					return usagef("--cwd %q: %v", f.cwd, err)
				}
				f.cwd = dir
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			return listSessions(ctx, e, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the sessions as JSON")
	fl.BoolVar(&f.archived, "archived", false, "include archived sessions")
	fl.BoolVar(&f.allHosts, "all-hosts", false, "list the sessions of every home whose host runs in the runtime directory")
	fl.StringVar(&f.cwd, "cwd", "", "only the sessions working in this directory")
	fl.IntVar(&f.limit, "limit", 0, "list at most this many sessions (0: all)")
	return cmd
}

// listedSession is a row of ls: a session and the host it is on.
type listedSession struct {
	hostID string
	protocol.Session
}

func listSessions(ctx context.Context, e *env, f lsFlags) error {
	// This home's host comes up if it is not running; others are listed as found.
	own, info, err := openOwn(ctx)
	if err != nil {
		return err
	}
	defer own.Close()
	var rows []listedSession
	// --json of one host, unfiltered, writes the rows as they come: a row
	// is kept only to choose it by its directory, order the hosts' rows or
	// draw the table. A host lost halfway leaves the rows written so far,
	// and the command fails.
	var out *jsonRows
	if f.asJSON && f.cwd == "" && !f.allHosts {
		out = newJSONRows(e.stdout)
	}
	add := func(hostID string, c *client.Conn) error {
		in := protocol.SessionListInput{IncludeArchived: f.archived, Limit: protocol.MaxSessionPage}
		for {
			page, err := client.Call(ctx, c, protocol.OpSessionList, in)
			if err != nil {
				return err
			}
			next := page.NextCursor
			for _, sess := range page.Sessions {
				r := listedSession{hostID: hostID, Session: sess}
				switch {
				case out == nil:
					if f.cwd == "" || sameDir(r.Cwd, f.cwd) {
						rows = append(rows, r)
					}
				case f.limit == 0 || out.n < f.limit:
					out.write(r)
				}
			}
			if next == "" || out != nil && f.limit > 0 && out.n >= f.limit {
				return nil
			}
			in.Cursor = next
		}
	}
	if err := add(info.HostID, own); err != nil {
		return err
	}
	if out != nil {
		return out.end()
	}
	hostsListed := 1
	if f.allHosts {
		hosts, _ := activation.Discover(ctx, mustRuntimeDir())
		for _, h := range hosts {
			if h.HostID == info.HostID {
				continue
			}
			c, err := client.Dial(ctx, h.Endpoint, client.Options{Surface: protocol.SurfaceCLI})
			if err != nil {
				fmt.Fprintf(e.stderr, "agentd: host %s: %v\n", h.HostID, err)
				continue
			}
			if err := add(h.HostID, c); err != nil {
				fmt.Fprintf(e.stderr, "agentd: host %s: %v\n", h.HostID, err)
			}
			c.Close()
			hostsListed++
		}
		slices.SortStableFunc(rows, func(a, b listedSession) int {
			return b.LastActivityAt.Compare(a.LastActivityAt)
		})
	}
	more := 0
	if f.limit > 0 && len(rows) > f.limit {
		more = len(rows) - f.limit
		rows = rows[:f.limit]
	}
	if f.asJSON {
		out := newJSONRows(e.stdout)
		for _, r := range rows {
			out.write(r)
		}
		return out.end()
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stderr, "no sessions")
		return nil
	}
	pal := paletteFor(e.stdout)
	tw := newTable(e.stdout)
	multi := hostsListed > 1
	heading := "ID\tTITLE\tSTATUS\tMODEL\tSANDBOX\tLAST ACTIVITY\tDIRECTORY"
	if multi {
		heading = "HOST\t" + heading
	}
	fmt.Fprintln(tw, pal.heading(heading))
	for _, r := range rows {
		if multi {
			fmt.Fprintf(tw, "%s\t", r.hostID)
		}
		status := r.Status
		if r.Damaged {
			status = "damaged"
		} else if r.Archived {
			status = "archived"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", pal.id(r.SessionID), pal.title(r.Title), pal.state(status), r.Model,
			sandboxLabel(r.Session), pal.dim(ago(r.LastActivityAt)), tui.Visible(r.Cwd))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more > 0 {
		fmt.Fprintf(e.stderr, "%d more not listed (--limit %d)\n", more, f.limit)
	}
	return nil
}

// jsonRows writes ls --json: a JSON array of the sessions as their hosts
// sent them, each with its host's id added.
type jsonRows struct {
	out    *bufio.Writer
	n      int    // rows written
	host   string // the host of the last row
	prefix []byte // its rows' start: {"hostId":"…",
}

func newJSONRows(w io.Writer) *jsonRows {
	out := bufio.NewWriterSize(w, 64<<10)
	out.WriteByte('[')
	return &jsonRows{out: out}
}

func (j *jsonRows) write(r listedSession) {
	if j.n > 0 {
		j.out.WriteByte(',')
	}
	if j.prefix == nil || r.hostID != j.host {
		id, _ := json.Marshal(r.hostID)
		j.host, j.prefix = r.hostID, fmt.Appendf(nil, `{"hostId":%s,`, id)
	}
	j.out.Write(j.prefix)
	raw, _ := json.Marshal(r.Session)
	j.out.Write(bytes.TrimPrefix(raw, []byte("{")))
	j.n++
}

// end closes the array and writes what is buffered.
func (j *jsonRows) end() error {
	j.out.WriteString("]\n")
	return j.out.Flush()
}

// sameDir reports whether a session's cwd is dir, which may name it
// through symbolic links.
func sameDir(cwd, dir string) bool {
	if cwd == dir {
		return true
	}
	real, err := filepath.EvalSymlinks(dir)
	return err == nil && real == cwd
}

func mustRuntimeDir() string {
	act, err := activation.Resolve(activation.Options{})
	if err != nil {
		return ""
	}
	return act.RuntimeDir
}

// ago is tui.Ago, with "-" for no time, as the listing's columns want.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return tui.Ago(t)
}

// sessionCmd is a command taking one session selector and answering with
// the session.
func sessionCmd[In any](e *env, use, short string, op protocol.Op[In, protocol.Session], build func(id string, args []string) In) *cobra.Command {
	var asJSON bool
	n := strings.Count(use, " ")
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(n, strings.SplitN(use, " ", 2)[1]),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				s, err := client.Call(ctx, l.conn, op, build(l.session.SessionID, args[1:]))
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, s)
				}
				fmt.Fprintln(e.stdout, s.SessionID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session as JSON")
	return cmd
}

func newRenameCmd(e *env) *cobra.Command {
	return sessionCmd(e, "rename SESSION TITLE", "Rename a session.", protocol.OpSessionRename, func(id string, rest []string) protocol.SessionRenameInput {
		return protocol.SessionRenameInput{SessionID: id, Title: rest[0]}
	})
}

func newArchiveCmd(e *env) *cobra.Command {
	return sessionCmd(e, "archive SESSION", "Archive a session: it leaves the list and takes no more turns until unarchived.", protocol.OpSessionArchive, func(id string, _ []string) protocol.SessionRef {
		return protocol.SessionRef{SessionID: id}
	})
}

func newUnarchiveCmd(e *env) *cobra.Command {
	return sessionCmd(e, "unarchive SESSION", "Bring an archived session back to the list, ready for turns again.", protocol.OpSessionUnarchive, func(id string, _ []string) protocol.SessionRef {
		return protocol.SessionRef{SessionID: id}
	})
}

func newRmCmd(e *env) *cobra.Command {
	var asJSON, force bool
	cmd := &cobra.Command{
		Use:   "rm SESSION",
		Short: "Remove a session and its transcript (a running one: asked first, or --force).",
		Args:  exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				s := l.session
				if s.Status != protocol.SessionIdle && !force {
					if err := confirmRemove(e, s); err != nil {
						return err
					}
				}
				ref, err := client.Call(ctx, l.conn, protocol.OpSessionRemove, protocol.SessionRef{SessionID: s.SessionID})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, ref)
				}
				fmt.Fprintf(e.stdout, "removed %s\n", ref.SessionID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the removed session's id as JSON")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove a session even while its turn runs, stopping the turn")
	return cmd
}

// sessionTakenAway says what became of session id, whose stream the host
// closed as removed while its turn ran: archived, or removed (its log with
// it).
func sessionTakenAway(ctx context.Context, c *client.Conn, id string) error {
	var s protocol.Session
	s, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
	switch {
	case err == nil && s.Archived:
		return fmt.Errorf("session %s was archived while its turn ran; `agentd unarchive %s` makes it active again", id, id)
	case errors.Is(err, client.ErrNotFound):
		return fmt.Errorf("session %s was removed while its turn ran", id)
	}
	return fmt.Errorf("session %s was removed or archived while its turn ran", id)
}

// confirmRemove asks on a terminal whether to remove session s, whose
// turn runs; off one it refuses, naming --force.
func confirmRemove(e *env, s protocol.Session) error {
	if !canAsk(e) {
		return fmt.Errorf("session %s is running a turn; `agentd stop %s` stops it, or `agentd rm --force %s` removes the session all the same", s.SessionID, s.SessionID, s.SessionID)
	}
	if !confirm(e, fmt.Sprintf("session %s (%s) is running a turn. Stop it and remove the session?", s.SessionID, tui.Visible(sessionLabel(s)))) {
		return fmt.Errorf("session %s was not removed", s.SessionID)
	}
	return nil
}

// canAsk reports whether the command can ask a person a question: its
// stdin and stderr are a terminal.
func canAsk(e *env) bool { return tui.IsTerminal(e.stdin) && tui.IsTerminal(e.stderr) }

// confirm asks question on the terminal and reports whether the answer
// was yes; anything else, or no answer, is no.
func confirm(e *env, question string) bool {
	fmt.Fprintf(e.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// rootTurn returns the session's latest turn, from a subscription snapshot.
func rootTurn(ctx context.Context, c *client.Conn, id string) (*protocol.TurnSnapshot, error) {
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: id, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		return nil, err
	}
	defer client.Call(ctx, c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID})
	var snap protocol.SessionProjection
	if err := json.Unmarshal(open.Snapshot, &snap); err != nil {
		return nil, err
	}
	return snap.RootTurn, nil
}

func newStopCmd(e *env) *cobra.Command {
	var afterStep, now bool
	cmd := &cobra.Command{
		Use:   "stop SESSION [REF]",
		Short: "Stop a session's running turn at once, its running tool killed (--after-step: after its current step), or one of its resources.",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 2 && (afterStep || now):
				return usagef("stop --after-step and --now are for a turn: give no REF")
			case afterStep && now:
				return usagef("stop --after-step waits for the current step, --now does not: give one")
			case len(args) == 2:
				return exactArgs(2, "SESSION REF")(cmd, args)
			}
			return exactArgs(1, "SESSION, or SESSION REF")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				c := l.conn
				if len(args) == 2 {
					return stopResource(ctx, e, c, l.session.SessionID, args[1])
				}
				t, err := rootTurn(ctx, c, l.session.SessionID)
				if err != nil {
					return err
				}
				if t == nil || t.Status != protocol.TurnRunning {
					fmt.Fprintln(e.stdout, "no turn is running")
					return nil
				}
				op, what := protocol.OpTurnInterrupt, "stopping turn %s\n"
				if afterStep {
					op, what = protocol.OpTurnStop, "stopping turn %s after its current step\n"
				}
				if _, err := client.Call(ctx, c, op, protocol.TurnRef{SessionID: t.SessionID, TurnID: t.TurnID}); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, what, t.TurnID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&afterStep, "after-step", false, "let the running step (the model's reply and the tools it called) finish, then stop")
	// --now was the way to stop at once before that became the default:
	// it is still taken, and changes nothing.
	cmd.Flags().BoolVar(&now, "now", false, "stop at once (the default)")
	cmd.Flags().MarkHidden("now")
	return cmd
}

// stopResource stops resource ref of session id (TERM, then KILL after a
// grace) and says how it ended.
func stopResource(ctx context.Context, e *env, c *client.Conn, id, ref string) error {
	r, err := client.Call(ctx, c, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: id, Ref: ref})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s stopped (%s)\n", r.Ref, exitOf(r))
	return nil
}

func newAnswerCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "answer [SESSION INTERACTION allow|deny]",
		Short: "List pending approvals of every session, or answer one.",
		Args: func(cmd *cobra.Command, args []string) error {
			switch len(args) {
			case 0:
			case 3:
				takesOperands(cmd)
			default:
				return usagef("answer takes no arguments (list) or SESSION INTERACTION allow|deny")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				if len(args) == 3 {
					l, err := locateSession(ctx, args[0])
					if err != nil {
						return err
					}
					defer l.conn.Close()
					in, err := client.Call(ctx, l.conn, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: l.session.SessionID, InteractionID: args[1], Answer: args[2]})
					if err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "%s: %s\n", in.InteractionID, in.Answer)
					return nil
				}
				running, err := runningSessions(ctx, c)
				if err != nil {
					return err
				}
				pending := []protocol.Interaction{}
				for _, s := range running {
					res, err := client.Call(ctx, c, protocol.OpInteractionQuery, protocol.SessionRef{SessionID: s.SessionID})
					if err != nil {
						return err
					}
					pending = append(pending, res.Pending...)
				}
				if asJSON {
					return writeJSON(e.stdout, pending)
				}
				if len(pending) == 0 {
					fmt.Fprintln(e.stdout, "nothing is waiting for an answer")
				}
				for _, in := range pending {
					fmt.Fprintf(e.stdout, "%s %s  %s\n", in.SessionID, in.InteractionID, in.Prompt)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print pending interactions as JSON")
	return cmd
}

// sessionLabel names session s for a person beside its id: its title and
// the directory it works in, "fix the build, in proj", or "untitled, in
// proj" before its first prompt.
func sessionLabel(s protocol.Session) string {
	return cmp.Or(s.Title, "untitled") + ", in " + filepath.Base(s.Cwd)
}
