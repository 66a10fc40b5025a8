package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// The page's tests run it in headless Chromium (Debian's chromium),
// one browser for the package, each test in a browser context of its own
// (its own cookies and storage), against real agentd hosts.

// envPageShots names a directory the tests write the page's screenshots
// to (docs/ when they are remade); unset, they write none.
const envPageShots = "AGENTD_PAGE_SHOTS"

// pageWait bounds each wait for the page on a loaded machine.
const pageWait = 90 * time.Second

var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

// startBrowser starts the package's browser once.
func startBrowser() (context.Context, error) {
	browser.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		browser.ctx = ctx
		browser.cancel = func() {
			chromedp.Cancel(ctx)
			cancelCtx()
			cancelAlloc()
		}
		browser.err = chromedp.Do(ctx)
	})
	return browser.ctx, browser.err
}

// closeBrowser ends the browser, if a test started it.
func closeBrowser() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

// newTab opens a tab in a new browser context, its viewport width×height.
func newTab(t *testing.T, width, height int64) context.Context {
	t.Helper()
	b, err := startBrowser()
	if err != nil {
		t.Fatalf("starting Chromium (apt-get install -y chromium): %v", err)
	}
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// until waits for the page's expression to be true.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(pageWait))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s: %v\nthe page shows:\n%s", what, err, html)
	}
}

func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// hasText is a page expression: some element of sel holds text.
func hasText(sel, text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text)
}

// countText is a page expression: how many elements of sel hold text.
func countText(sel, text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].filter(e => e.textContent.includes(%q)).length`, sel, text)
}

// typeText enters text as a keyboard's input method does: one input event.
// (Key events carry each character twice to a terminal: in the key press
// and in the character it types.)
func typeText(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
		return err
	})
}

// pressEnter presses Enter: its key down alone, which a terminal reads.
func pressEnter() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13}); err != nil {
				return err
			}
		}
		return nil
	})
}

func shot(t *testing.T, ctx context.Context, name string, capture chromedp.Action[[]byte]) {
	t.Helper()
	dir := os.Getenv(envPageShots)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

type webURLs struct {
	URL        string `json:"url"`
	OwnerToken string `json:"ownerToken"`
}

func (p *place) web() webURLs {
	var w webURLs
	if err := json.Unmarshal([]byte(p.mustRun("web", "--json")), &w); err != nil {
		p.t.Fatal(err)
	}
	return w
}

// The owner opens the link agentd web prints: the token leaves the URL at
// once; the page lists the session, follows a turn live, answers its
// approval, types into a new terminal; after a dropped connection it
// resumes where it was, missing and repeating nothing; on a phone's
// viewport nothing scrolls sideways and every button is a usable target.
func TestThePageFollowsATurnAnswersAnApprovalAndTypesIntoATerminal(t *testing.T) {
	p := newPlace(t)
	p.extraEnv = append(p.extraEnv, "SHELL=/bin/sh") // a terminal without the machine's shell start-up files
	writeScript(t, p, `{"replies":[
		{"steps":[{"text":"Checking "},{"text":"first."},{"tool":"bash","arguments":{"command":"seq 1 40; echo web-approved"},"id":"call-1"}]},
		{"steps":[{"text":"All "},{"delay":"100ms"},{"text":"done."}]},
		{"steps":[{"text":"After the drop."}]},
		{"steps":[{"text":"Thinking long"},{"delay":"1h"}]},
		{"steps":[{"text":"Steered."}]}
	]}`)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask", "--title", "Fix the tokenizer"))
	w := p.web()
	ctx := newTab(t, 1280, 900)

	do(t, ctx, chromedp.Navigate(w.URL+"#token="+w.OwnerToken))
	row := fmt.Sprintf(`#sessions li[data-session=%q] a`, id)
	until(t, ctx, "the session listed", fmt.Sprintf(`document.querySelector(%q) !== null`, row))
	if href := eval[string](t, ctx, `location.href`); strings.Contains(href, "token") || strings.Contains(href, w.OwnerToken) {
		t.Fatalf("the token stayed in the URL: %s", href)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(row)))
	until(t, ctx, "the prompt box", `document.querySelector('#prompt').offsetParent !== null && document.querySelector('#session-status').textContent === 'idle'`)

	do(t, ctx, chromedp.SetValue(chromedp.CSS("#prompt"), "please fix it"), chromedp.Click(chromedp.CSS("#send")))
	until(t, ctx, "the reply streamed and the approval asked", hasText("#transcript .rec", "Checking first.")+" && "+hasText("#approvals .approval", "seq 1 40; echo web-approved"))
	if n := eval[int](t, ctx, countText("#transcript .rec.user", "please fix it")); n != 1 {
		t.Fatalf("the prompt is shown %d times", n)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS("#approvals button.allow")))
	until(t, ctx, "the tool's output, folded, and the final reply", hasText(`#transcript [data-call="call-1"] details.out-box .out`, "web-approved")+" && "+hasText("#transcript .rec", "All done.")+` && document.querySelector('#session-status').textContent === 'idle' && document.querySelector('#approvals').children.length === 0`)

	// A terminal: its screen live, control taken on the first key.
	do(t, ctx, chromedp.Click(chromedp.CSS("#new-pty")))
	until(t, ctx, "the terminal", hasText("#pty-who", "type or take control")+` && document.querySelector('#pty .xterm-helper-textarea') !== null`)
	do(t, ctx, chromedp.Focus(chromedp.CSS("#pty .xterm-helper-textarea")), typeText("echo typed-$((6*7))"), pressEnter())
	until(t, ctx, "the typed command's output", hasText("#pty .xterm-rows", "typed-42")+" && "+hasText("#pty-who", "this page controls it"))

	// A dropped connection: the page dials again and resumes after the
	// last record it had.
	eval[bool](t, ctx, `page.ws.close(), true`)
	p.mustRun("run", "--session", id, "--approve", "all", "and after the drop?")
	until(t, ctx, "the turn run while the page reconnected", hasText("#transcript .rec", "After the drop.")+` && document.querySelector('#conn').dataset.state === 'live'`)
	for _, text := range []string{"please fix it", "All done.", "and after the drop?", "After the drop."} {
		if n := eval[int](t, ctx, countText("#transcript .rec", text)); n != 1 {
			t.Errorf("%q is shown %d times after the reconnection", text, n)
		}
	}

	// While a turn runs: a message steers it, queued until taken; the
	// turn is interrupted.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#prompt"), "a long one"), chromedp.Click(chromedp.CSS("#send")))
	until(t, ctx, "the running turn", hasText("#transcript .rec.streaming", "Thinking long")+` && document.querySelector('#interrupt').offsetParent !== null && document.querySelector('#placement').offsetParent !== null`)
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#prompt"), "steer it"), chromedp.Click(chromedp.CSS("#send")))
	until(t, ctx, "the steering message queued", hasText("#queue li", "steer: steer it"))
	do(t, ctx, chromedp.Click(chromedp.CSS("#interrupt")))
	until(t, ctx, "the turn interrupted, and the message it left starting the next", hasText("#transcript .rec.failed", "Turn interrupted")+" && "+hasText("#transcript .rec", "Steered.")+` && document.querySelector('#session-status').textContent === 'idle' && document.querySelector('#queue-box').hidden`)
	if n := eval[int](t, ctx, countText("#transcript .rec.failed", "Turn interrupted")); n != 1 {
		t.Errorf("the interruption is shown %d times", n)
	}

	// A phone: reloaded at 390×844, the page logs in by its cookie.
	do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Reload())
	until(t, ctx, "the session on a phone", hasText("#transcript .rec", "After the drop.")+" && "+hasText("#resources", "running"))
	if wide := eval[int](t, ctx, `document.documentElement.scrollWidth - window.innerWidth`); wide > 0 {
		t.Errorf("the page scrolls %d px sideways at 390 px", wide)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(`#resources li[data-ref="pty-2"] button.show`)))
	until(t, ctx, "the terminal on a phone", hasText("#pty .xterm-rows", "typed-42"))
	if wide := eval[int](t, ctx, `document.documentElement.scrollWidth - window.innerWidth`); wide > 0 {
		t.Errorf("with a terminal shown, the page scrolls %d px sideways at 390 px", wide)
	}
	small := eval[[]string](t, ctx, `[...document.querySelectorAll('button, select, textarea:not(.xterm-helper-textarea), #sessions a')].filter(e => e.offsetParent !== null).filter(e => { const r = e.getBoundingClientRect(); return r.height < 44 || r.width < 44; }).map(e => e.id || e.textContent)`)
	if len(small) > 0 {
		t.Errorf("touch targets smaller than 44 px: %q", small)
	}
}

// A guest's observe link shows its one session, live, without a control
// to drive it; forcing an operation is refused, and another session is
// not found; agentd share rm ends its stream at once.
func TestAnObserveLinkSeesOneSessionReadOnlyUntilRevoked(t *testing.T) {
	p := newPlace(t)
	writeScript(t, p, `{"replies":[{"steps":[{"text":"Seen by the guest."}]}]}`)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	other := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	p.web()
	var share struct {
		GrantID string `json:"grantId"`
		URL     string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id, "--label", "Ana", "--json")), &share); err != nil {
		t.Fatal(err)
	}
	ctx := newTab(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(share.URL))
	until(t, ctx, "the shared session", fmt.Sprintf(`page.cur !== null && page.cur.subId !== null && page.cur.id === %q`, id))
	if href := eval[string](t, ctx, `location.href`); strings.Contains(href, "token") {
		t.Fatalf("the token stayed in the URL: %s", href)
	}
	if listed := eval[[]string](t, ctx, `page.sessions.map(s => s.sessionId)`); len(listed) != 1 || listed[0] != id {
		t.Fatalf("the guest's page lists %q, want only %s", listed, id)
	}
	if shown := eval[bool](t, ctx, `['#prompt-form', '#interrupt', '#new-pty'].some(s => document.querySelector(s).offsetParent !== null)`); shown {
		t.Fatal("an observe guest is shown a control")
	}

	p.mustRun("run", "--session", id, "--approve", "all", "for the guest to watch")
	until(t, ctx, "the turn, live", hasText("#transcript .rec", "Seen by the guest."))

	forced := eval[string](t, ctx, fmt.Sprintf(`call('turn.message.submit', {sessionId: %q, messageId: 'forced-1', content: {text: 'forced'}, placement: 'next_turn'}).then(() => 'accepted', e => e.code)`, id))
	if forced == "accepted" {
		t.Fatal("an observe guest's forced prompt was accepted")
	}
	if got := eval[string](t, ctx, fmt.Sprintf(`call('session.get', {sessionId: %q}).then(() => 'found', e => e.code)`, other)); got != "not_found" {
		t.Fatalf("the guest's session.get of another session: %s", got)
	}

	revoked := time.Now()
	p.mustRun("share", "rm", share.GrantID)
	until(t, ctx, "the stream to end", `document.querySelector('#conn').dataset.state === 'ended' && page.cur === null && document.querySelector('#transcript').offsetParent === null`)
	t.Logf("the page ended the guest's view %v after agentd share rm returned; its forced prompt was refused with %s", time.Since(revoked), forced)
}

// A guest's page rides out agentd upgrade: the new host listens on the
// web at the same address again by itself, knows the page's cookie from
// the old host, and the page carries on from the last record it had,
// missing and repeating nothing.
func TestAGuestPageReconnectsAcrossAnUpgrade(t *testing.T) {
	p := newPlace(t)
	writeScript(t, p, `{"replies":[{"steps":[{"text":"Before the upgrade."}]},{"steps":[{"text":"After the upgrade."}]}]}`)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	p.web()
	var share struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id, "--control", "--json")), &share); err != nil {
		t.Fatal(err)
	}
	ctx := newTab(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(share.URL))
	until(t, ctx, "the shared session", fmt.Sprintf(`page.cur !== null && page.cur.subId !== null && page.cur.id === %q`, id))
	p.mustRun("run", "--session", id, "--approve", "all", "before?")
	until(t, ctx, "the turn before the upgrade", hasText("#transcript .rec", "Before the upgrade."))
	epoch := eval[string](t, ctx, `page.hostEpoch`)

	p.mustRun("upgrade")
	p.mustRun("run", "--session", id, "--approve", "all", "after?")
	until(t, ctx, "the page on the new host", hasText("#transcript .rec", "After the upgrade.")+fmt.Sprintf(` && page.hostEpoch !== %q && document.querySelector('#conn').dataset.state === 'live'`, epoch))
	for _, text := range []string{"before?", "Before the upgrade.", "after?", "After the upgrade."} {
		if n := eval[int](t, ctx, countText("#transcript .rec", text)); n != 1 {
			t.Errorf("%q is shown %d times after the upgrade", text, n)
		}
	}
}

// The page shows a model call that failed and waits to be made again in
// the reply that waits for it, counting down, and the reply once it
// comes, without the notice.
func TestThePageShowsAModelCallRetriedInTheWaitingReply(t *testing.T) {
	p := newPlace(t)
	overloaded := anthropicFixture(t, "error_529.json")
	reply := anthropicFixture(t, "text.sse")
	release := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no models here"}}`, http.StatusNotFound)
			return
		}
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After-Ms", "10")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			io.WriteString(w, overloaded)
			return
		}
		// The second call answers once the test has seen the notice.
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+srv.URL)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--model", "anthropic/claude-sonnet-4-5"))
	w := p.web()
	ctx := newTab(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(w.URL+"#token="+w.OwnerToken))
	row := fmt.Sprintf(`#sessions li[data-session=%q] a`, id)
	until(t, ctx, "the session listed", fmt.Sprintf(`document.querySelector(%q) !== null`, row))
	do(t, ctx, chromedp.Click(chromedp.CSS(row)))
	until(t, ctx, "the prompt box", `document.querySelector('#prompt').offsetParent !== null && document.querySelector('#session-status').textContent === 'idle'`)

	do(t, ctx, chromedp.SetValue(chromedp.CSS("#prompt"), "hi"), chromedp.Click(chromedp.CSS("#send")))
	until(t, ctx, "the retry shown in the waiting reply", hasText("#transcript .rec.streaming .retry", "retrying")+" && "+hasText("#transcript .rec.streaming .retry", "anthropic: overloaded (HTTP 529) (attempt 1 of 6 failed)"))
	once.Do(func() { close(release) })
	until(t, ctx, "the reply, the notice gone", hasText("#transcript .rec", "Hello, world.")+` && document.querySelector('#transcript .retry') === null && document.querySelector('#session-status').textContent === 'idle'`)
}

// The page shows a compaction as it happens, and where it stands in the
// transcript when the page reads it afresh.
func TestThePageShowsACompactionLiveAndInTheTranscript(t *testing.T) {
	p := newSessionPlace(t)
	_, errOut, code := p.run("run", "--cwd", p.workDir(), "--approve", "all", "the first request")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	p.mustRun("run", "--session", id, "the second request")
	w := p.web()
	ctx := newTab(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(w.URL+"#token="+w.OwnerToken))
	row := fmt.Sprintf(`#sessions li[data-session=%q] a`, id)
	until(t, ctx, "the session listed", fmt.Sprintf(`document.querySelector(%q) !== null`, row))
	do(t, ctx, chromedp.Click(chromedp.CSS(row)))
	until(t, ctx, "the transcript", hasText("#transcript .rec.user", "the second request"))

	p.mustRun("compact", id, "--keep", "1")
	until(t, ctx, "the compaction, live", hasText("#transcript .rec.note.compaction", "Context compacted here (asked for): 3 earlier messages summarized")+
		" && "+hasText("#transcript .rec.note.compaction details.summary", "Summary of 2 earlier requests"))
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "the compaction, read afresh, after the originals", hasText("#transcript .rec.note.compaction", "Context compacted here")+
		` && [...document.querySelectorAll('#transcript .rec')].findIndex(e => e.textContent.includes('the first request')) < [...document.querySelectorAll('#transcript .rec')].findIndex(e => e.classList.contains('compaction'))`)
	if n := eval[int](t, ctx, countText("#transcript .rec.note.compaction", "Context compacted here")); n != 1 {
		t.Fatalf("the compaction is shown %d times", n)
	}
}
