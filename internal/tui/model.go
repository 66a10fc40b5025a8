package tui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/plugin"
	"github.com/agentd-dev/agentd/protocol"
)

// requestTimeout bounds each request the screen sends.
const requestTimeout = 15 * time.Second

// Bounds of the pages of older transcript the screen reads: a small first
// one, which fills a screen sooner, then larger ones as the person scrolls
// up.
const (
	firstPageBytes   = 16 << 10
	historyPageBytes = 64 << 10
)

// Options configure Run.
type Options struct {
	// Follower follows the session shown; Run closes it.
	Follower *client.Follower
	// Input and Output are the terminal.
	Input  io.Reader
	Output io.Writer
	// Env is the terminal's environment (TERM, …); the process's when nil.
	Env []string
	// FirstPage, when set, returns the newest page of the session's
	// transcript (ReadFirstPage), read while Follower's stream opened, or
	// nil; Run asks for it once the screen is laid out, which the read
	// need not wait for. The first frame is drawn from the page at once
	// instead of after a request of its own. A page that cannot be joined
	// to the stream's snapshot without a gap is left out, and the screen
	// reads its own.
	FirstPage func() *FirstPage
	// OpenPTY, when set, shows the session's PTY ref full screen on the
	// terminal, which the screen lets go of meanwhile, until the person
	// comes back or the PTY exits; it returns what to tell the person
	// then. Follower should follow with SessionOptions.Resources, for the
	// list of resources to follow their changes.
	OpenPTY func(ctx context.Context, ref string) (string, error)
	// OpenLog, when set, shows the output of the session's shell run ref
	// on the terminal, live while it runs, as OpenPTY shows a PTY.
	OpenLog func(ctx context.Context, ref string) (string, error)
	// Colours, when set, is the detection of Output's colours, started
	// while the session was found (DetectColours); Run detects them
	// itself otherwise.
	Colours *Colours
	// Signals, when set, are the screen's signals, asked for while the
	// session was found (NotifySignals), the caller's to stop; Run asks
	// for them itself otherwise.
	Signals *Signals
}

// Signals are the signals a screen follows: the terminal's new sizes
// (SIGWINCH), and Ctrl-\ typed while the terminal is not raw yet
// (SIGQUIT), which detaches rather than end the process with a dump of
// its goroutines. Asking for a signal the process has not had is a
// hand-over to the runtime's signal thread and back (os/signal), which
// NotifySignals makes on a goroutine of its own: a command need not wait
// on it while it finds its session.
type Signals struct {
	asked       sync.WaitGroup
	winch, quit chan os.Signal
}

// NotifySignals starts asking for a screen's signals.
func NotifySignals() *Signals {
	s := &Signals{winch: make(chan os.Signal, 1), quit: make(chan os.Signal, 1)}
	s.asked.Go(func() {
		signal.Notify(s.winch, syscall.SIGWINCH)
		signal.Notify(s.quit, syscall.SIGQUIT)
	})
	return s
}

// Stop stops the signals, once asked for.
func (s *Signals) Stop() {
	s.asked.Wait()
	signal.Stop(s.winch)
	signal.Stop(s.quit)
}

// Colours is the detection of a terminal's colour profile, run in the
// background: inside tmux it asks tmux (`tmux info`, a process), which a
// command need not wait for while it finds its session.
type Colours struct {
	done    chan struct{}
	profile colorprofile.Profile // set before done closes
}

// DetectColours starts detecting the colours of terminal out, from env
// (the process's when nil).
//
// The screen's colours are the 256 of ANSI at most, which a terminal of
// 256 colours draws as one of more colours does: when out is a terminal
// whose environment says 256 colours or more (TERM=xterm-256color, say),
// that is its profile, and neither the terminal's terminfo nor tmux is
// asked whether it has more. Should the screen come to draw colours
// beyond the 256, this must ask them.
func DetectColours(out io.Writer, env []string) *Colours {
	if env == nil {
		env = os.Environ()
	}
	c := &Colours{done: make(chan struct{})}
	if p := colorprofile.Env(env); p >= colorprofile.ANSI256 && IsTerminal(out) {
		c.profile = p
		close(c.done)
		return c
	}
	go func() {
		defer close(c.done)
		c.profile = colorprofile.Detect(out, env)
	}()
	return c
}

// IsTerminal reports whether f is a file open on a terminal.
func IsTerminal(f any) bool {
	file, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
	return err == nil
}

// Profile waits for the detection and returns the profile it found.
func (c *Colours) Profile() colorprofile.Profile {
	<-c.done
	return c.profile
}

// Run mirrors a session on a terminal until the person detaches (Ctrl-\),
// ctx ends, or the session's stream ends for good. Detaching stops
// nothing: the session runs on. A stream that ended (the session removed,
// say) ends the screen too, and Run returns the follower's error, the
// terminal given back.
func Run(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newModel(ctx, opts.Follower)
	m.openPTY, m.openLog = opts.OpenPTY, opts.OpenLog
	// At bubbletea's highest frame rate the first screen, and each change
	// of a streaming reply, is drawn within 8 ms, not 17.
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(opts.Input), tea.WithFPS(120)}
	if opts.Env != nil {
		popts = append(popts, tea.WithEnvironment(opts.Env))
	}
	// Sizes changed from now on are followed (followSize); Ctrl-\ typed
	// while the terminal is not raw yet (the first frame is drawn before)
	// detaches too.
	sigs := opts.Signals
	if sigs == nil {
		sigs = NotifySignals()
		defer sigs.Stop()
	}
	winch, quit := sigs.winch, sigs.quit
	tty, _ := opts.Output.(*os.File)
	cols, rows, err := windowSize(tty)
	if err != nil {
		tty = nil
	}
	var profile colorprofile.Profile
	if tty == nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	} else {
		// Given the terminal itself, Bubble Tea follows its size from a
		// goroutine of its own, which races with its taking the terminal
		// back from a PTY's view (tea.Exec) when the size changed
		// meanwhile. It is given a writer, and the screen follows the
		// size itself.
		colours := opts.Colours
		if colours == nil {
			colours = DetectColours(tty, opts.Env)
		}
		profile = colours.Profile()
		popts = append(popts, tea.WithOutput(writer{tty}), tea.WithColorProfile(profile), tea.WithWindowSize(cols, rows))
	}
	if tty != nil {
		m.update(tea.WindowSizeMsg{Width: cols, Height: rows})
	}
	if opts.FirstPage != nil {
		if p := opts.FirstPage(); p != nil {
			m.firstPage(p.Page, p.blocks)
		}
	}
	drawn := false
	if tty != nil && m.started {
		// Bubble Tea writes its first frame on its renderer's first tick,
		// a frame's time after it starts: the screen is drawn now, and
		// that frame draws it again.
		drawn = m.drawFirst(tty, profile) == nil
	}
	var wg sync.WaitGroup
	wg.Go(warmWidths) // after the first frame, which it would slow on a busy machine
	p := tea.NewProgram(m, popts...)
	wg.Go(func() { m.in.read(ctx, opts.Follower) })
	var quitted atomic.Bool
	wg.Go(func() {
		select {
		case <-quit:
			quitted.Store(true)
			cancel()
		case <-ctx.Done():
		}
	})
	if tty != nil {
		wg.Go(func() { followSize(ctx, p, tty, winch) })
	}
	_, err = p.Run()
	if drawn && err != nil && (!errors.Is(err, tea.ErrProgramKilled) || quitted.Load()) {
		tty.WriteString(firstFrameUndo) // Bubble Tea may not have started
	}
	cancel()
	wg.Wait()
	opts.Follower.Close()
	switch {
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return nil
	case err == nil && m.ended != nil:
		return fmt.Errorf("following session %s: %w", opts.Follower.SessionID(), m.ended)
	}
	return err
}

// warmWidths does the work Bubble Tea's first frame would otherwise wait
// on: measuring the first character above U+02FF on a terminal without
// grapheme clustering (mode 2027), as most are, builds go-runewidth's
// 2 MiB width table. Where page faults are dear that takes milliseconds
// to tens of them. The screen's own first frame (drawFirst) measures
// without it.
func warmWidths() {
	ansi.WcWidth.StringWidth("─")
}

// FirstPage is the newest page of a session's transcript, read for a
// first screen (ReadFirstPage).
type FirstPage struct {
	Page client.TranscriptPage
	// blocks are the page's records as the screen draws them, made where
	// the page was read, while the screen was set up.
	blocks *Feed
}

// ReadFirstPage reads the newest page of session id's transcript on c,
// sized for a first screen, for Options.FirstPage, and makes its records
// blocks.
func ReadFirstPage(ctx context.Context, c *client.Conn, id string) (FirstPage, error) {
	page, err := c.TranscriptPage(ctx, id, client.PageRequest{Direction: client.PageOlder, MaxBytes: firstPageBytes})
	if err != nil {
		return FirstPage{}, err
	}
	return FirstPage{Page: page, blocks: feedOf(page.Records)}, nil
}

// feedOf returns records made blocks.
func feedOf(records []protocol.TranscriptRecord) *Feed {
	f := NewFeed(0)
	for _, r := range records {
		f.Record(r)
	}
	return f
}

// What drawFirst writes before the first frame, and what undoes it: the
// terminal's alternate screen, cleared, the cursor hidden, as Bubble Tea
// has it.
const (
	firstFrameSetup = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"
	firstFrameUndo  = "\x1b[?25h\x1b[?1049l"
)

// drawFirst writes the screen's first frame to terminal w in colour
// profile p.
func (m *model) drawFirst(w io.Writer, p colorprofile.Profile) error {
	frame := firstFrameSetup + strings.ReplaceAll(m.View().Content, "\n", "\r\n")
	if p < colorprofile.ANSI256 {
		// The screen's colours are the 256 of ANSI at most: only a
		// terminal with fewer needs them brought down.
		w = &colorprofile.Writer{Forward: w, Profile: p}
	}
	_, err := io.WriteString(w, frame)
	return err
}

// writer is a terminal as a writer alone.
type writer struct{ f *os.File }

func (w writer) Write(b []byte) (int, error) { return w.f.Write(b) }

// windowSize returns terminal f's size.
func windowSize(f *os.File) (cols, rows int, err error) {
	if f == nil {
		return 0, 0, errors.New("no terminal")
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0, err
	}
	return int(ws.Col), int(ws.Row), nil
}

// followSize tells p terminal tty's size each time winch says it
// changed, until ctx ends.
func followSize(ctx context.Context, p *tea.Program, tty *os.File, winch <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-winch:
		}
		if cols, rows, err := windowSize(tty); err == nil {
			p.Send(tea.WindowSizeMsg{Width: cols, Height: rows})
		}
	}
}

// Messages the model receives from its commands.
type (
	// pageMsg is a page of older transcript.
	pageMsg struct {
		page client.TranscriptPage
		err  error
		// blocks, when set, are the page's records made blocks already.
		blocks *Feed
	}
	// doneMsg is the outcome of a request.
	doneMsg struct {
		what string
		err  error
	}
)

// model is the screen's state. Bubble Tea calls its methods on one
// goroutine; the commands it returns run elsewhere and touch none of it.
type model struct {
	ctx context.Context
	f   *client.Follower
	in  *inbox // the follower's events, read as they come

	proj    *protocol.Projector
	feed    *Feed    // what the stream brought since the screen opened
	history []*Block // older blocks, paged in as the person scrolls up
	hidden  int      // the history's oldest blocks not drawn yet (hideOlder)
	through uint64   // the last record history pages read through
	cursor  string   // the next older page's cursor; "" before the first
	paging  bool     // an older page is being read
	noOlder bool     // history reaches the transcript's start, or cannot be read
	// started is set when the history started with a page read before the
	// screen (Options.FirstPage); afterFirst is what Init then does for
	// the history: read on while the screen is not full.
	started    bool
	afterFirst tea.Cmd
	// awaited are the history's tool calls that ran as the screen opened,
	// by call id, until the feed has a block for them (joinCalls).
	awaited map[string]*Block
	skips   map[*Block][]skip // where a streaming block's stream skipped
	// inTool are the notes drawn inside each tool call's block (placeNote);
	// placed, the notes drawn so, not at their own place.
	inTool map[*Block][]placedNote
	placed map[*Block]bool

	width, height int
	view          viewport.Model
	lines         []string // the view's content, line by line (transcript)
	input         textinput.Model
	render        *renderer

	res      resources // the session's shell runs and PTYs
	paneOpen bool      // the resources' pane is open, and takes the keys
	openPTY  func(ctx context.Context, ref string) (string, error)
	openLog  func(ctx context.Context, ref string) (string, error)

	conn   string // what happened to the connection, while it is not well
	behind bool   // the stream is opened again after the screen fell behind
	flash  string // a message for the person, until the next key
	// turnFlash marks a flash about the running turn (interrupting it,
	// stopping it), which goes once no turn runs.
	turnFlash bool
	armed     bool  // Ctrl-C was pressed once
	ended     error // why the stream ended for good
	follow    bool  // the view follows the transcript's end
}

func newModel(ctx context.Context, f *client.Follower) *model {
	snap := f.Session().Snapshot()
	in := textinput.New()
	in.Prompt = "> "
	in.Placeholder = "a prompt: enter sends it, alt+enter queues it"
	in.Focus()
	m := &model{
		ctx: ctx, f: f, in: newInbox(), proj: protocol.NewProjector(snap), feed: NewFeed(f.LastRecord()),
		through: snap.TranscriptSequence, noOlder: snap.TranscriptSequence == 0,
		view: viewport.New(), input: in, render: newRenderer(), follow: true,
		awaited: map[string]*Block{}, skips: map[*Block][]skip{}, inTool: map[*Block][]placedNote{}, placed: map[*Block]bool{},
	}
	m.view.KeyMap = viewport.KeyMap{} // keys are routed by the model
	m.feed.OnChange = m.changed
	m.feed.Streams(snap.Streams)
	m.runningCalls(snap.ToolCalls)
	return m
}

func (m *model) Init() tea.Cmd {
	history := m.afterFirst
	if !m.started {
		history = m.older()
	}
	return tea.Batch(m.next(), history, m.readResources(), textinput.Blink)
}

// firstPage starts the history with page p, the transcript's newest,
// read while the stream opened, unless it cannot be joined to the
// stream's snapshot: read through less than it, the records between
// would be missing; starting after it, the stream brings its records
// too. Its records after the snapshot's last are left to the stream.
// Blocks, when set, are all of p's records made blocks: used when none is
// left out.
func (m *model) firstPage(p client.TranscriptPage, blocks *Feed) {
	snap := m.through
	if p.Through < snap || len(p.Records) > 0 && p.Records[0].Seq > snap {
		return
	}
	kept := p.Records[:0:0]
	for _, r := range p.Records {
		if r.Seq <= snap {
			kept = append(kept, r)
		}
	}
	if len(kept) < len(p.Records) {
		blocks = nil
	}
	p.Records, p.Through = kept, snap
	m.paging = true
	m.afterFirst = m.page(pageMsg{page: p, blocks: blocks})
	m.started = true
}

// next takes the follower's next events.
func (m *model) next() tea.Cmd { return m.in.next(m.ctx) }

// older reads the page of transcript before the history the screen has.
func (m *model) older() tea.Cmd {
	if m.noOlder || m.paging {
		return nil
	}
	m.paging = true
	size := historyPageBytes
	if m.cursor == "" {
		size = firstPageBytes
	}
	c, id, req := m.f.Conn(), m.f.SessionID(), client.PageRequest{
		Direction: client.PageOlder, Cursor: m.cursor, Through: m.through, MaxBytes: size,
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(m.ctx, requestTimeout)
		defer cancel()
		page, err := c.TranscriptPage(ctx, id, req)
		return pageMsg{page: page, err: err}
	}
}

// request sends a request about the session in the background.
func (m *model) request(what string, fn func(ctx context.Context, c *client.Conn, session string) error) tea.Cmd {
	c, id := m.f.Conn(), m.f.SessionID()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(m.ctx, requestTimeout)
		defer cancel()
		return doneMsg{what, fn(ctx, c, id)}
	}
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	m.layout()
	return m, cmd
}

func (m *model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width != m.width || msg.Height != m.height {
			m.hidden = 0 // laid out anew for another size
		}
		m.width, m.height = msg.Width, msg.Height
		m.input.SetWidth(max(msg.Width-3, 1))
		m.refresh()
		return nil
	case eventsMsg:
		return m.events(msg)
	case pageMsg:
		return m.page(msg)
	case resourcesMsg:
		m.listed(msg)
		return nil
	case ptyDoneMsg:
		m.ptyDone(msg)
		return nil
	case doneMsg:
		if msg.err != nil {
			m.flash = fmt.Sprintf("%s: %v", msg.what, msg.err)
		}
		return nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return cmd
}

// events applies a batch of what the follower brought, then draws.
func (m *model) events(msg eventsMsg) tea.Cmd {
	if len(msg.evs) == 0 && msg.err == nil {
		return m.next() // woken for events taken already
	}
	cmds := make([]tea.Cmd, 0, len(msg.evs)+1)
	for _, ev := range msg.evs {
		cmds = append(cmds, m.applyEvent(ev))
	}
	if msg.err != nil {
		// The follower ended for good (the session removed, say): the
		// screen lets go of the terminal, and Run says why.
		if m.ctx.Err() == nil {
			m.ended = msg.err
		}
		return tea.Quit
	}
	if _, running := m.running(); m.turnFlash && !running {
		m.flash, m.turnFlash = "", false
	}
	m.refresh()
	return tea.Batch(append(cmds, m.next())...)
}

// applyEvent applies one event the follower brought.
func (m *model) applyEvent(ev client.FollowEvent) tea.Cmd {
	var cmd tea.Cmd
	switch {
	case ev.Lost != nil && errors.Is(ev.Lost, client.ErrWatcherSlow):
		// The screen fell behind, while it showed a PTY, say: its stream
		// opens again after the last record it has, and nothing is lost.
		m.conn, m.behind = "catching up…", true
	case ev.Lost != nil:
		m.conn = "connection lost: reconnecting…"
		m.feed.Note(fmt.Sprintf("connection lost (%v): reconnecting", ev.Lost), true)
	case ev.Resource != nil:
		m.res.put(*ev.Resource)
	case ev.Snapshot != nil:
		m.proj = protocol.NewProjector(*ev.Snapshot)
		m.feed.Streams(ev.Snapshot.Streams)
		m.runningCalls(ev.Snapshot.ToolCalls)
		if ev.Reopened {
			if !m.behind {
				m.feed.Note("reconnected", false)
			}
			m.conn, m.behind = "", false
			m.res.reset()
			cmd = m.readResources()
		}
	default:
		d := ev.Delta
		if d.Skipped > 0 {
			// Marked by the screen itself, where the block shows it.
			m.skipped(d)
			d.Skipped = 0
		}
		m.proj.Apply(d)
		m.feed.Delta(d)
	}
	return cmd
}

// page adds a page of older transcript above the history; while the
// screen is not yet full, it reads the next.
func (m *model) page(msg pageMsg) tea.Cmd {
	m.paging = false
	if msg.err != nil {
		m.noOlder = true
		m.history = append([]*Block{{Kind: BlockNote, Text: fmt.Sprintf("earlier transcript unavailable (%v): agentd log %s prints it", msg.err, m.f.SessionID()), Done: true}}, m.history...)
		m.refresh()
		return nil
	}
	older := msg.blocks
	if older == nil {
		older = feedOf(msg.page.Records)
	}
	if m.cursor == "" && msg.page.Through != 0 {
		m.through = msg.page.Through
	}
	first := m.cursor == "" && len(m.history) == 0
	m.cursor = msg.page.NextCursor
	m.noOlder = m.cursor == ""
	before := m.view.TotalLineCount()
	blocks := m.joinCalls(older.Blocks)
	m.history = append(blocks, m.history...)
	if first {
		m.hideOlder()
	}
	m.refresh()
	if !m.follow {
		m.view.SetYOffset(m.view.YOffset() + m.view.TotalLineCount() - before)
	}
	if m.view.TotalLineCount() < m.view.Height() {
		return m.older()
	}
	return nil
}

// running reports whether the session runs a turn, and which.
func (m *model) running() (string, bool) {
	p := m.proj.Projection()
	if p.RootTurn != nil && p.RootTurn.Status == protocol.TurnRunning {
		return p.RootTurn.TurnID, true
	}
	return "", false
}

// pending returns the approvals the running turn waits for: none once no
// turn runs, whatever the stream said of them.
func (m *model) pending() []protocol.Interaction {
	if _, running := m.running(); !running {
		return nil
	}
	return m.proj.Projection().Interactions
}

func (m *model) answer(in protocol.Interaction, answer string) tea.Cmd {
	return m.request("answer", func(ctx context.Context, c *client.Conn, session string) error {
		_, err := client.Call(ctx, c, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: session, InteractionID: in.InteractionID, Answer: answer})
		if errors.Is(err, client.ErrNotFound) {
			return nil // answered elsewhere first
		}
		return err
	})
}

// key handles a key press.
func (m *model) key(k tea.KeyPressMsg) tea.Cmd {
	key := k.String()
	armed := m.armed
	m.armed = false
	if key != "ctrl+c" {
		m.flash, m.turnFlash = "", false
	}
	if m.paneOpen {
		if cmd, handled := m.paneKey(key); handled {
			return cmd
		}
	}
	if (key == "ctrl+u" || key == "ctrl+d") && m.input.Value() != "" {
		// On a line being typed they are readline's: ctrl+u deletes
		// what is before the cursor, ctrl+d the character under it. They
		// scroll half a page on an empty line.
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(k)
		return cmd
	}
	switch key {
	case "tab":
		m.togglePane()
		return nil
	case "ctrl+\\":
		return tea.Quit
	case "ctrl+c":
		turn, running := m.running()
		switch {
		case !armed && running:
			m.armed, m.flash = true, "ctrl+c again stops the turn after its current step (esc interrupts it now)"
		case !armed:
			m.armed, m.flash = true, "no turn runs: ctrl+c again detaches (as ctrl+\\ does)"
		case running:
			m.flash, m.turnFlash = "stopping the turn after its current step", true
			return m.request("stop", func(ctx context.Context, c *client.Conn, session string) error {
				_, err := client.Call(ctx, c, protocol.OpTurnStop, protocol.TurnRef{SessionID: session, TurnID: turn})
				return err
			})
		default:
			return tea.Quit
		}
		return nil
	case "esc":
		if turn, running := m.running(); running {
			m.flash, m.turnFlash = "interrupting the turn", true
			return m.request("interrupt", func(ctx context.Context, c *client.Conn, session string) error {
				_, err := client.Call(ctx, c, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: session, TurnID: turn})
				return err
			})
		}
		return nil
	case "enter", "alt+enter":
		text := strings.TrimSpace(m.input.Value())
		if text == "" {
			return nil
		}
		m.input.SetValue("")
		m.follow = true
		m.refresh()
		return m.send(text, key == "alt+enter")
	case "pgup", "up", "ctrl+u":
		m.scroll(key, -1)
		if m.view.AtTop() {
			return m.older()
		}
		return nil
	case "pgdown", "down", "ctrl+d":
		m.scroll(key, 1)
		return nil
	}
	if m.input.Value() == "" {
		if ins := m.pending(); len(ins) > 0 {
			in := ins[0]
			switch key {
			case "y":
				return m.answer(in, protocol.AnswerAllow)
			case "n":
				return m.answer(in, protocol.AnswerDeny)
			case "a":
				// The session keeps the rule, for every client and the
				// next worker too.
				m.flash = fmt.Sprintf("%s is allowed for the rest of the session", in.Tool())
				return m.answer(in, protocol.AnswerAllowAlways)
			}
		}
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return cmd
}

func (m *model) scroll(key string, dir int) {
	if dir < 0 {
		m.showAll()
	}
	switch key {
	case "pgup", "pgdown":
		if dir < 0 {
			m.view.PageUp()
		} else {
			m.view.PageDown()
		}
	case "ctrl+u", "ctrl+d":
		if dir < 0 {
			m.view.HalfPageUp()
		} else {
			m.view.HalfPageDown()
		}
	default:
		if dir < 0 {
			m.view.ScrollUp(1)
		} else {
			m.view.ScrollDown(1)
		}
	}
	m.follow = m.view.AtBottom()
}

// send sends a prompt: a turn of its own when none runs, else into the
// running turn; queued as a follow-up with alt+enter.
func (m *model) send(text string, queue bool) tea.Cmd {
	_, running := m.running()
	return m.request("send", func(ctx context.Context, c *client.Conn, session string) error {
		// A line typed as /name args is a prompt command of the session's
		// plugin packages: its prompt is sent.
		if name, args, ok := plugin.ParseInvocation(text); ok {
			res, err := client.Call(ctx, c, protocol.OpSessionCommandExpand, protocol.CommandExpandInput{SessionID: session, Name: name, Arguments: args})
			if err != nil {
				return err
			}
			text = res.Prompt
		}
		if !running && !queue {
			_, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: session, TurnID: "t" + newID(), Content: protocol.Content{Text: text}})
			if !errors.Is(err, client.ErrOperationConflict) {
				return err
			}
			// A turn started meanwhile: the prompt goes into it.
		}
		placement := protocol.PlacementSteering
		if queue {
			placement = protocol.PlacementNextTurn
		}
		_, err := client.Call(ctx, c, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{
			SessionID: session, MessageID: newID(), Content: protocol.Content{Text: text}, Placement: placement,
		})
		return err
	})
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
