package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// lsResults are the figures of the ls part.
type lsResults struct {
	createRate float64 // session.create/s, pipelined on one connection
	tmux       bool
	// at holds the measurements at each session count: a quarter of the
	// goal's count first (for scale), then the goal's.
	at []lsMeasure
}

// lsMeasure is one session count's figures.
type lsMeasure struct {
	sessions  int
	lsJSON    summary // `agentd ls --json`
	lsTable   summary // `agentd ls`
	dirLs     summary // `ls` of the sessions folder
	tmuxList  summary // `tmux list-sessions`, one session
	list      summary // session.list on an open connection, in this process
	listBytes int
	err       string // why `agentd ls --json` failed, when it did
	tableErr  string
	listErr   string
}

// lsPart times `agentd ls --json` over many sessions with a warm host,
// beside `ls` of the sessions folder and `tmux list-sessions` against a
// running tmux server. The sessions are created through the protocol:
// session.create requests pipelined over one connection. It measures at a
// quarter of the count first, then at the full count.
func (b *bench) lsPart(ctx context.Context) error {
	r := &b.res.ls
	home, runDir, err := newPlace(filepath.Join(b.base, "l"))
	if err != nil {
		return err
	}
	c, _, err := b.openHost(ctx, home, runDir)
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	defer c.Close()

	tmux, terr := exec.LookPath("tmux")
	tmuxEnv := append(cleanEnv(), "TMUX=")
	tmuxSock := filepath.Join(b.base, "t.sock")
	if terr == nil {
		if out, err := command(ctx, tmuxEnv, tmux, "-S", tmuxSock, "-f", "/dev/null", "new-session", "-d").CombinedOutput(); err != nil {
			fmt.Printf("ls: tmux new-session failed (%v: %s); the tmux anchor is skipped\n", err, out)
			terr = err
		} else {
			defer command(ctx, tmuxEnv, tmux, "-S", tmuxSock, "kill-server").Run()
		}
	} else {
		fmt.Println("ls: tmux not found; its anchor is skipped (apt-get install -y tmux)")
	}
	r.tmux = terr == nil
	tmuxList := func() *exec.Cmd {
		return command(ctx, tmuxEnv, tmux, "-S", tmuxSock, "list-sessions")
	}
	if !r.tmux {
		tmuxList = nil
	}

	created := 0
	var createTime time.Duration
	for _, n := range []int{b.cfg.sessions / 4, b.cfg.sessions} {
		fmt.Printf("ls: creating sessions %d to %d with session.create, %d in flight on one connection\n", created+1, n, protocol.ClientInFlightDomainRequests)
		t0 := time.Now()
		if err := createSessions(ctx, c, b.work, created, n); err != nil {
			return err
		}
		createTime += time.Since(t0)
		created = n
		m := b.measureLs(ctx, c, home, runDir, n, tmuxList)
		r.at = append(r.at, m)
	}
	r.createRate = float64(created) / createTime.Seconds()
	fmt.Printf("  session.create: %.0f/s\n", r.createRate)
	return nil
}

// createSessions creates sessions from+1 to n, ClientInFlightDomainRequests
// at a time on c.
func createSessions(ctx context.Context, c *client.Conn, cwd string, from, n int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, protocol.ClientInFlightDomainRequests)
	for range protocol.ClientInFlightDomainRequests {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if _, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{
					Cwd: cwd, Title: fmt.Sprintf("bench %05d", i), Model: "faux/echo",
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("session.create: %w", err)
	}
	return nil
}

// measureLs times session.list in process, then `agentd ls --json`,
// `agentd ls`, `ls` of the sessions folder and tmuxList (when not nil),
// interleaved, b.cfg.lsRuns times each.
func (b *bench) measureLs(ctx context.Context, c *client.Conn, home, runDir string, n int, tmuxList func() *exec.Cmd) lsMeasure {
	m := lsMeasure{sessions: n}
	var list []time.Duration
	for range 3 {
		t0 := time.Now()
		got, err := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{})
		if err != nil {
			m.listErr = err.Error()
			break
		}
		list = append(list, time.Since(t0))
		raw, _ := json.Marshal(got)
		m.listBytes = len(raw)
	}
	m.list = summarize(list)
	if m.listErr != "" {
		fmt.Printf("  session.list failed: %s\n", m.listErr)
	} else {
		fmt.Printf("  session.list in process: p50 %s, result %d bytes\n", dur(m.list.p50), m.listBytes)
	}

	env := b.agentdEnv(home, runDir)
	sessionsDir := filepath.Join(home, "sessions")
	fmt.Printf("ls: %d `agentd ls --json` runs over %d sessions, interleaved with `agentd ls`, `ls <home>/sessions` and `tmux list-sessions`\n", b.cfg.lsRuns, n)
	var lsJSON, lsTable, dirLs, tmux []time.Duration
	checked := false
	note := func(where *string, err error) {
		if *where == "" {
			*where = err.Error()
			fmt.Printf("  %s\n", *where)
		}
	}
	for i := range b.cfg.lsRuns {
		steps := []func(){
			func() {
				d, out, err := timeRun(command(ctx, env, b.agentd, "ls", "--json"))
				if err != nil {
					note(&m.err, err)
					return
				}
				if !checked {
					var rows []protocol.Session
					if err := json.Unmarshal(out, &rows); err != nil {
						note(&m.err, fmt.Errorf("agentd ls --json printed no JSON list: %v: %s", err, lastLines(out, 2)))
						return
					}
					if len(rows) != n {
						note(&m.err, fmt.Errorf("agentd ls --json listed %d sessions, want %d", len(rows), n))
						return
					}
					checked = true
				}
				lsJSON = append(lsJSON, d)
			},
			func() {
				d, _, err := timeRun(command(ctx, env, b.agentd, "ls"))
				if err != nil {
					note(&m.tableErr, err)
					return
				}
				lsTable = append(lsTable, d)
			},
			func() {
				if d, _, err := timeRun(command(ctx, cleanEnv(), "ls", sessionsDir)); err == nil {
					dirLs = append(dirLs, d)
				}
			},
		}
		if tmuxList != nil {
			steps = append(steps, func() {
				if d, _, err := timeRun(tmuxList()); err == nil {
					tmux = append(tmux, d)
				}
			})
		}
		for j := range steps {
			steps[(i+j)%len(steps)]()
		}
	}
	m.lsJSON, m.lsTable, m.dirLs, m.tmuxList = summarize(lsJSON), summarize(lsTable), summarize(dirLs), summarize(tmux)
	fmt.Printf("  agentd ls --json p50 %s p90 %s (n=%d)\n", dur(m.lsJSON.p50), dur(m.lsJSON.p90), m.lsJSON.n)
	fmt.Printf("  agentd ls        p50 %s p90 %s (n=%d)\n", dur(m.lsTable.p50), dur(m.lsTable.p90), m.lsTable.n)
	fmt.Printf("  ls of the folder p50 %s p90 %s\n", dur(m.dirLs.p50), dur(m.dirLs.p90))
	if tmuxList != nil {
		fmt.Printf("  tmux ls          p50 %s p90 %s\n", dur(m.tmuxList.p50), dur(m.tmuxList.p90))
	}
	return m
}
