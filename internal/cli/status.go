package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/internal/version"
	"github.com/agentd-dev/agentd/protocol"
)

// requestTimeout bounds one client command's wait for its host.
const requestTimeout = 30 * time.Second

func newStatusCmd(e *env) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the host of this home, starting it if none runs.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			if all {
				return statusAll(ctx, e.stdout, asJSON)
			}
			c, err := open(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			running, err := runningSessions(ctx, c)
			if err != nil {
				return err
			}
			if asJSON {
				// As the table does, the count leaves out this
				// command's own request.
				st.ActiveOperations = othersActive(st)
				return writeJSON(e.stdout, struct {
					protocol.HostStatus
					Running []protocol.Session `json:"runningSessions"`
				}{st, running})
			}
			printStatus(e.stdout, st)
			printRunning(e.stdout, running)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	cmd.Flags().BoolVar(&all, "all", false, "list every live host in the runtime directory")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

// othersActive is a host's count of active operations without the
// host.status request that asked for it.
func othersActive(st protocol.HostStatus) int { return max(st.ActiveOperations-1, 0) }

func printStatus(w io.Writer, st protocol.HostStatus) {
	pal := paletteFor(w)
	tw := newTable(w)
	fmt.Fprintf(tw, "version\t%s\n", st.Version)
	fmt.Fprintf(tw, "protocol\t%d..%d\n", st.ProtocolMin, st.ProtocolMax)
	fmt.Fprintf(tw, "host id\t%s\n", st.HostID)
	fmt.Fprintf(tw, "pid\t%d\n", st.PID)
	fmt.Fprintf(tw, "state\t%s\n", pal.state(st.State))
	fmt.Fprintf(tw, "uptime\t%s\n", (time.Duration(st.UptimeMillis) * time.Millisecond).Round(time.Second))
	if st.Home != "" {
		fmt.Fprintf(tw, "home\t%s\n", st.Home)
	}
	logFile := st.LogFile
	if logFile == "" {
		logFile = pal.dim("its standard error")
	}
	fmt.Fprintf(tw, "log\t%s\n", logFile)
	fmt.Fprintf(tw, "connections\t%d\n", st.Connections)
	fmt.Fprintf(tw, "active operations\t%d\n", othersActive(st))
	fmt.Fprintf(tw, "sandbox\t%s\n", sandboxStatus(pal))
	if len(st.Providers) > 0 {
		fmt.Fprintf(tw, "providers\t%s\n", providersLine(st.Providers))
	}
	if st.Web != nil {
		fmt.Fprintf(tw, "web\t%s\n", st.Web.WebSocketURL)
	} else if st.WebOff != "" {
		fmt.Fprintf(tw, "web\t%s\n", pal.dim("off: "+st.WebOff+" (agentd web)"))
	} else {
		fmt.Fprintf(tw, "web\t%s\n", pal.dim("off (agentd web)"))
	}
	tw.Flush()
}

// runningSessions returns the sessions of c's host whose turn runs.
func runningSessions(ctx context.Context, c *client.Conn) ([]protocol.Session, error) {
	return sessionsWhere(ctx, c, func(s protocol.Session) bool { return s.Status != protocol.SessionIdle && !s.Damaged })
}

// sessionsWhere returns the sessions of c's host that keep keeps, reading
// every page of the host's list.
func sessionsWhere(ctx context.Context, c *client.Conn, keep func(protocol.Session) bool) ([]protocol.Session, error) {
	kept := []protocol.Session{}
	in := protocol.SessionListInput{Limit: protocol.MaxSessionPage}
	for {
		res, err := client.Call(ctx, c, protocol.OpSessionList, in)
		if err != nil {
			return nil, err
		}
		for _, s := range res.Sessions {
			if keep(s) {
				kept = append(kept, s)
			}
		}
		if res.NextCursor == "" {
			return kept, nil
		}
		in.Cursor = res.NextCursor
	}
}

func printRunning(w io.Writer, running []protocol.Session) {
	pal := paletteFor(w)
	if len(running) == 0 {
		fmt.Fprintf(w, "\nno session is running\n")
		return
	}
	fmt.Fprintf(w, "\n%s\n", pal.heading(counted(len(running), "session", "sessions")+" running"))
	tw := newTable(w)
	for _, s := range running {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", pal.id(s.SessionID), pal.state(s.Status), pal.title(s.Title), tui.Visible(s.Cwd))
	}
	tw.Flush()
}

// counted says n of a thing: "1 session", "2 sessions".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// statusAll lists every live host of the runtime directory, without
// starting any.
func statusAll(ctx context.Context, w io.Writer, asJSON bool) error {
	act, err := activation.Resolve(activation.Options{})
	if err != nil {
		return err
	}
	hosts, err := activation.Discover(ctx, act.RuntimeDir)
	if err != nil {
		return err
	}
	type row struct {
		protocol.HostStatus
		Home     string `json:"home"`
		Endpoint string `json:"endpoint"`
		Error    string `json:"error,omitempty"`
	}
	rows := make([]row, 0, len(hosts))
	for _, h := range hosts {
		r := row{Home: h.Home, Endpoint: h.Endpoint}
		r.HostID, r.PID, r.State, r.Version = h.HostID, h.PID, h.State, h.Version
		st, err := hostStatus(ctx, h.Endpoint)
		if err != nil {
			r.Error = err.Error()
		} else {
			r.HostStatus = st
			r.ActiveOperations = othersActive(st)
		}
		rows = append(rows, r)
	}
	if asJSON {
		return writeJSON(w, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "no agentd host is running in %s\n", act.RuntimeDir)
		return nil
	}
	pal := paletteFor(w)
	tw := newTable(w)
	fmt.Fprintln(tw, pal.heading("HOST ID\tPID\tSTATE\tVERSION\tUPTIME\tCONNECTIONS\tACTIVE\tHOME"))
	for _, r := range rows {
		state := pal.state(r.State)
		if r.Error != "" {
			state = pal.paint(styles().bad, "unreachable: "+r.Error)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", r.HostID, r.PID, state, r.Version,
			(time.Duration(r.UptimeMillis) * time.Millisecond).Round(time.Second), r.Connections, r.ActiveOperations, r.Home)
	}
	return tw.Flush()
}

func hostStatus(ctx context.Context, endpoint string) (protocol.HostStatus, error) {
	c, err := client.Dial(ctx, endpoint, client.Options{Surface: protocol.SurfaceCLI})
	if err != nil {
		return protocol.HostStatus{}, err
	}
	defer c.Close()
	return c.Status(ctx)
}

func newShutdownCmd(e *env) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "shutdown",
		Short: "Stop the running host of this home, with its turns, shell runs and PTYs, and wait until it has exited.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			c, info, _, err := activation.Open(ctx, activation.OpenOptions{NoStart: true, Options: client.Options{Surface: protocol.SurfaceCLI}})
			if errors.Is(err, client.ErrNoHost) {
				fmt.Fprintln(e.stdout, "no agentd host is running")
				return nil
			}
			if err != nil {
				return err
			}
			defer c.Close()
			if !force {
				if err := confirmShutdown(ctx, e, c); err != nil {
					return err
				}
			}
			// The question may have waited on a person: the shutdown
			// has its own time.
			ctx, cancel = context.WithTimeout(cmd.Context(), 2*requestTimeout)
			defer cancel()
			if _, err := client.Call(ctx, c, protocol.OpHostShutdown, protocol.ShutdownInput{}); err != nil {
				return err
			}
			if err := activation.WaitExited(ctx, info); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "host %s (pid %d) has stopped\n", info.HostID, info.PID)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "stop the host without asking, even while turns, shell runs or PTYs run")
	return cmd
}

// confirmShutdown asks on a terminal whether to stop the turns, shell runs
// and PTYs that run on c's host, which shutting it down stops; off one it
// refuses, naming --force. When nothing runs it asks nothing.
func confirmShutdown(ctx context.Context, e *env, c *client.Conn) error {
	turns, resources, err := runningWork(ctx, c)
	if err != nil || turns+resources == 0 {
		return err
	}
	running := fmt.Sprintf("%s running and %s", count(turns, "turn is", "turns are"), count(resources, "shell run/PTY", "shell runs/PTYs"))
	if !canAsk(e) {
		return fmt.Errorf("%s: shutting down stops them; `agentd shutdown --force` stops them all the same, `agentd upgrade` replaces the host and keeps them", running)
	}
	if !confirm(e, running+": shutting down stops them. `agentd upgrade` replaces the host and keeps them. Stop them?") {
		return errors.New("the host was not stopped")
	}
	return nil
}

// count is n with the singular or plural of what it counts.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// runningWork counts the turns that run on c's host and the runtime
// resources (shell runs and PTYs, a running tool's command among them)
// that run in its sessions. A session removed meanwhile counts for
// nothing.
func runningWork(ctx context.Context, c *client.Conn) (turns, resources int, err error) {
	busy, err := runningSessions(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	for _, s := range busy {
		t, err := rootTurn(ctx, c, s.SessionID)
		if errors.Is(err, client.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		if t != nil && t.Status == protocol.TurnRunning {
			turns++
		}
		rs, err := c.Resources(ctx, s.SessionID)
		if errors.Is(err, client.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		for _, r := range rs {
			if r.State == protocol.ResourceRunning {
				resources++
			}
		}
	}
	return turns, resources, nil
}

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the agentd version and protocol range.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(e.stdout, "agentd %s (protocol %d..%d)\n", version.String(), protocol.ProtocolVersion, protocol.ProtocolVersion)
			return nil
		},
	}
}

// table aligns the tab-separated columns of what is written to it and
// writes the whole table at once on Flush. Widths are measured as a
// terminal shows them, so coloured cells line up.
type table struct {
	buf bytes.Buffer
	out io.Writer
}

func newTable(out io.Writer) *table { return &table{out: out} }

// Write adds rows: lines of cells separated by tabs.
func (t *table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush aligns the table and writes it.
func (t *table) Flush() error {
	if t.buf.Len() == 0 {
		return nil
	}
	var rows [][]string
	var widths []int
	for _, line := range strings.Split(strings.TrimSuffix(t.buf.String(), "\n"), "\n") {
		cells := strings.Split(line, "\t")
		for i, c := range cells {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], lipgloss.Width(c))
		}
		rows = append(rows, cells)
	}
	var out strings.Builder
	for _, cells := range rows {
		for i, c := range cells {
			out.WriteString(c)
			if i < len(cells)-1 {
				out.WriteString(strings.Repeat(" ", widths[i]-lipgloss.Width(c)+2))
			}
		}
		out.WriteByte('\n')
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, out.String())
	return err
}
