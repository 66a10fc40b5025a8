package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/protocol"
)

// turnTimeout bounds one turn, from its start through every fault and
// reconnection to its recorded end: far beyond what it takes, so that
// only a turn that never ends fails on it.
const turnTimeout = 2 * time.Minute

// maxMissed is how many faults in a row may find nothing to break before
// the soak gives up: something that should run does not.
const maxMissed = 20

// Config is a soak's shape.
type Config struct {
	// Duration is how long faults are injected.
	Duration time.Duration
	// MinFaults is the fewest faults injected, however long they take.
	MinFaults int
	// Sessions is how many sessions run turns at once.
	Sessions int
	// Seed seeds the faults' moments, kinds and targets.
	Seed int64
	// Lines is how many numbered lines each turn's command writes.
	Lines int
	// MaxGap is the longest wait before a fault once the sessions run.
	MaxGap time.Duration
	// Agentd is the agentd binary soaked; empty: this program, running
	// agentd's command line.
	Agentd string
	// Handoff adds the fault that kills the host in the middle of a
	// hand-off to a replacement (`agentd host --replace`).
	Handoff bool
	// Out receives the progress and the report.
	Out io.Writer
}

// Report is what a soak found.
type Report struct {
	Faults      int            // faults injected
	FaultKinds  map[string]int // faults injected, by kind
	Turns       int            // turns whose start was acknowledged
	Completed   int            // turns recorded completed
	Failed      int            // turns recorded failed
	Interrupted int            // turns recorded interrupted
	Records     int            // records in the transcripts at the end
	Lost        int            // records a client received, or turns acknowledged, missing from disk
	Duplicated  int            // records, turn starts or turn ends on disk twice
	TornTails   int            // torn last lines a worker set aside on opening a transcript
	Checks      int            // transcript checks run
	// LongestResume is the longest a client waited, from a fault to its
	// next successful request or stream event.
	LongestResume time.Duration
	// Failures says what each failed check found.
	Failures []string
}

// Soak runs sessions under faults and checks their transcripts.
type Soak struct {
	cfg    Config
	base   string   // temporary directory of the run
	home   string   // the home under test
	runDir string   // its runtime directory
	work   string   // the sessions' working directory
	agentd []string // the agentd command
	env    []string // extra environment of every agentd process
	prompt string   // every turn's prompt
	kinds  []faultKind
	rng    *rand.Rand // the driver's alone
	gate   *gate

	children sync.WaitGroup // waits on the processes this program started itself

	mu       sync.Mutex
	sessions []*sessionRun   // guarded by mu
	faults   []fault         // guarded by mu
	pids     map[int]bool    // guarded by mu: hosts and workers seen running
	lost     map[string]bool // guarded by mu: what went missing, by what it was
	dup      map[string]bool // guarded by mu: what was there twice
	failed   map[string]bool // guarded by mu: Failures, for uniqueness
	report   Report          // guarded by mu
}

// New prepares a soak in a fresh temporary directory.
func New(cfg Config) (*Soak, error) {
	if cfg.Sessions < 1 || cfg.Lines < 1 || cfg.MaxGap <= 0 {
		return nil, fmt.Errorf("want at least one session, one line and a positive gap: %d sessions, %d lines, gap %s", cfg.Sessions, cfg.Lines, cfg.MaxGap)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	// Short: socket paths stay under 108 bytes.
	base, err := os.MkdirTemp("", "soak")
	if err != nil {
		return nil, err
	}
	s := &Soak{
		cfg: cfg, base: base, home: filepath.Join(base, "h"), runDir: filepath.Join(base, "r"), work: filepath.Join(base, "work"),
		rng:  rand.New(rand.NewPCG(uint64(cfg.Seed), 0)),
		gate: newGate(cfg.Sessions),
		pids: map[int]bool{}, lost: map[string]bool{}, dup: map[string]bool{}, failed: map[string]bool{},
		report: Report{FaultKinds: map[string]int{}},
		// The offline model runs each backticked command with the bash tool.
		prompt: fmt.Sprintf("write numbered lines: run `for i in $(seq 1 %d); do echo line $i; sleep 0.01; done`", cfg.Lines),
		kinds:  slices.Clone(faultKinds),
	}
	if cfg.Handoff {
		s.kinds = append(s.kinds, handoffFault)
	}
	for _, d := range []string{s.home, s.runDir, s.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if cfg.Agentd != "" {
		s.agentd = []string{cfg.Agentd}
	} else {
		self, env, err := asagentd.Command()
		if err != nil {
			return nil, err
		}
		s.agentd = self
		s.env = append(s.env, env)
	}
	// No model key reaches the host, and a race-enabled binary does not
	// sleep at exit.
	s.env = append(s.env, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "GORACE=atexit_sleep_ms=0")
	return s, nil
}

// Report returns what the soak has found so far.
func (s *Soak) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.FaultKinds = make(map[string]int, len(s.report.FaultKinds))
	for k, n := range s.report.FaultKinds {
		r.FaultKinds[k] = n
	}
	r.Failures = slices.Clone(s.report.Failures)
	return r
}

// activation places the host of the soak's home.
func (s *Soak) activation() activation.Options {
	return activation.Options{
		Home: s.home, RuntimeDir: s.runDir,
		Command:   append(slices.Clone(s.agentd), "host", "--log-file", filepath.Join(s.home, activation.LogFileName)),
		IdleGrace: time.Hour, Env: s.env,
	}
}

// dial connects to the home's host, starting one when none runs: the
// sessions' clients reconnect through it.
func (s *Soak) dial(ctx context.Context) (*client.Conn, error) {
	c, _, _, err := activation.Open(ctx, activation.OpenOptions{Activation: s.activation(), Options: client.Options{Surface: protocol.SurfaceSDK}})
	return c, err
}

// Run creates the sessions, runs their turns under faults until the
// duration has passed and the fewest faults were injected, checks the
// transcripts after each fault and at the end, stops the host, and
// prints the report. It fails when a check failed.
func (s *Soak) Run(ctx context.Context) error {
	names := make([]string, len(s.kinds))
	for i, k := range s.kinds {
		names[i] = k.name
	}
	fmt.Fprintf(s.cfg.Out, "soak: %d sessions, %s, seed %d, faults: %s; agentd %s in %s\n",
		s.cfg.Sessions, s.cfg.Duration, s.cfg.Seed, strings.Join(names, ", "), strings.Join(s.agentd, " "), s.base)
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	err := s.startSessions(ctx)
	if err == nil {
		var loops sync.WaitGroup
		for _, r := range s.runs() {
			loops.Go(func() {
				if err := r.loop(ctx); err != nil {
					cancel(err)
				}
			})
		}
		if err = s.drive(ctx); err != nil {
			cancel(err)
		}
		loops.Wait()
		if cause := context.Cause(ctx); err == nil && cause != nil {
			err = cause
		}
	}
	for _, r := range s.runs() {
		r.f.Close()
	}
	// After a failure workers may be left orphaned, for no host to stop:
	// Close kills them.
	if serr := s.stopHost(err == nil); err == nil {
		err = serr
	}
	s.printReport(time.Since(start))
	if err != nil {
		return err
	}
	rep := s.Report()
	if len(rep.Failures) > 0 || rep.Lost > 0 || rep.Duplicated > 0 {
		return fmt.Errorf("%d checks failed, %d records lost, %d duplicated", len(rep.Failures), rep.Lost, rep.Duplicated)
	}
	return nil
}

func (s *Soak) runs() []*sessionRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessions)
}

// startSessions creates the sessions, with the offline model and every
// tool call allowed, and follows each.
func (s *Soak) startSessions(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	c, err := s.dial(octx)
	if err != nil {
		return fmt.Errorf("starting the host: %w", err)
	}
	defer c.Close()
	for i := range s.cfg.Sessions {
		in := protocol.SessionCreateInput{Cwd: s.work, Title: fmt.Sprintf("soak %d", i+1), Model: "faux/echo", Approval: protocol.ApprovalAll}
		sess, err := client.Call(octx, c, protocol.OpSessionCreate, in)
		if err != nil {
			return fmt.Errorf("creating a session: %w", err)
		}
		f, err := client.FollowSession(octx, s.dial, sess.SessionID, client.SessionOptions{})
		if err != nil {
			return fmt.Errorf("following session %s: %w", sess.SessionID, err)
		}
		s.mu.Lock()
		s.sessions = append(s.sessions, newSessionRun(s, sess.SessionID, f))
		s.mu.Unlock()
	}
	return nil
}

// drive injects faults at random moments, one at a time: after each, once
// every session has completed a turn begun after it, it checks the
// transcripts. Kinds come in a shuffled round, so each comes as often.
func (s *Soak) drive(ctx context.Context) error {
	end := time.Now().Add(s.cfg.Duration)
	var round []faultKind
	missed := 0 // faults in a row that found nothing to break
	for n := 0; time.Now().Before(end) || n < s.cfg.MinFaults; {
		if len(round) == 0 {
			round = slices.Clone(s.kinds)
			s.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		if err := sleep(ctx, time.Duration(s.rng.Int64N(int64(s.cfg.MaxGap)))); err != nil {
			return err
		}
		f, err := round[0].inject(ctx, s)
		if errors.Is(err, errNoTarget) && missed < maxMissed {
			missed++
			continue // nothing of that kind runs now: wait for another moment
		}
		missed = 0
		if err != nil {
			return fmt.Errorf("%s: %w", round[0].name, err)
		}
		f.kind = round[0].name
		round = round[1:]
		n++
		s.noteFault(f)
		fmt.Fprintf(s.cfg.Out, "fault %d: %s\n", n, f)
		if err := s.quiesce(ctx, f.done, false, fmt.Sprintf("after fault %d", n)); err != nil {
			return err
		}
	}
	return s.quiesce(ctx, time.Now(), true, "at the end")
}

// quiesce waits until every session has completed a turn begun after
// after and waits, checks the transcripts, and lets the sessions go on,
// or end when final.
func (s *Soak) quiesce(ctx context.Context, after time.Time, final bool, when string) error {
	select {
	case <-s.gate.shut(after):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	s.check(when, final)
	s.gate.open(final)
	return nil
}

// noteFault records a fault and starts every client's wait to resume.
func (s *Soak) noteFault(f fault) {
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.report.Faults++
	s.report.FaultKinds[f.kind]++
	runs := slices.Clone(s.sessions)
	s.mu.Unlock()
	for _, r := range runs {
		r.faulted(f.at)
	}
}

// faultsDuring returns the faults that may have hit a turn of session id
// that ran from began to ended.
func (s *Soak) faultsDuring(id string, began, ended time.Time) []fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hit []fault
	for _, f := range s.faults {
		if (f.target == "" || f.target == id) && !f.done.Before(began) && !f.at.After(ended) {
			hit = append(hit, f)
		}
	}
	return hit
}

// fail records a failed check, once.
func (s *Soak) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failed[msg] {
		s.failed[msg] = true
		s.report.Failures = append(s.report.Failures, msg)
	}
}

func (s *Soak) printReport(took time.Duration) {
	r := s.Report()
	var kinds []string
	for _, k := range s.kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k.name, r.FaultKinds[k.name]))
	}
	w := s.cfg.Out
	fmt.Fprintf(w, "\nsoak: %s, %d sessions, seed %d\n", took.Round(time.Millisecond), s.cfg.Sessions, s.cfg.Seed)
	fmt.Fprintf(w, "  faults injected      %d (%s)\n", r.Faults, strings.Join(kinds, ", "))
	fmt.Fprintf(w, "  turns run            %d\n", r.Turns)
	fmt.Fprintf(w, "  turns completed      %d\n", r.Completed)
	fmt.Fprintf(w, "  turns interrupted    %d (failed %d, interrupted %d)\n", r.Failed+r.Interrupted, r.Failed, r.Interrupted)
	fmt.Fprintf(w, "  records on disk      %d\n", r.Records)
	fmt.Fprintf(w, "  records lost         %d\n", r.Lost)
	fmt.Fprintf(w, "  records duplicated   %d\n", r.Duplicated)
	fmt.Fprintf(w, "  torn tails set aside %d\n", r.TornTails)
	fmt.Fprintf(w, "  longest resume wait  %s\n", r.LongestResume.Round(time.Millisecond))
	fmt.Fprintf(w, "  transcript checks    %d, %d failed\n", r.Checks, len(r.Failures))
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  FAIL %s\n", f)
	}
}

// Close kills, by pid, any agentd process of the soak still running, waits
// for the processes it started itself, and removes its directory.
func (s *Soak) Close() {
	s.killLeftovers()
	s.children.Wait()
	os.RemoveAll(s.base)
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
