package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
)

// The session list follows the host as a person sees it, with no reload
// and no poll: a session created elsewhere appears, its title, its
// running and its end show as they happen, an archived one leaves; a
// guest's list holds its session alone.
func TestThePagesSessionListFollowsTheHostWithoutPolling(t *testing.T) {
	p := newPlace(t)
	writeScript(t, p, `{"replies":[{"steps":[{"text":"Working"},{"delay":"1h"}]}]}`)
	first := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--title", "First one"))
	w := p.web()
	ctx := newTab(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(w.URL+"#token="+w.OwnerToken))
	row := func(id string) string { return fmt.Sprintf(`#sessions li[data-session=%q]`, id) }
	until(t, ctx, "the session listed", fmt.Sprintf(`document.querySelector(%q) !== null && page.listSub !== null`, row(first)))
	// Every read of the list from here on is counted: there is none.
	eval[bool](t, ctx, `(() => { const read = call; window.listReads = 0; call = (op, input) => { if (op === 'session.list') window.listReads++; return read(op, input); }; return true; })()`)

	second := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	until(t, ctx, "a session created elsewhere", fmt.Sprintf(`document.querySelector(%q) !== null`, row(second)))
	p.mustRun("rename", second, "Renamed <b>elsewhere</b>")
	until(t, ctx, "its new title, as text", hasText(row(second)+" .name", "Renamed <b>elsewhere</b>")+fmt.Sprintf(` && document.querySelector(%q) === null`, row(second)+" b"))
	p.mustRun("run", "--session", first, "--approve", "all", "-d", "work long")
	until(t, ctx, "the session running", fmt.Sprintf(`document.querySelector(%q).dataset.status === 'running'`, row(first)+" .status"))
	if order := eval[[]string](t, ctx, `[...document.querySelectorAll('#sessions li')].map(li => li.dataset.session)`); len(order) != 2 || order[0] != first {
		t.Errorf("the list's order once %s is active again: %q", first, order)
	}
	p.mustRun("stop", first)
	until(t, ctx, "the session idle again", fmt.Sprintf(`document.querySelector(%q).dataset.status === 'idle'`, row(first)+" .status"))
	p.mustRun("archive", second)
	until(t, ctx, "the archived session gone from the list", fmt.Sprintf(`document.querySelector(%q) === null`, row(second)))
	if reads := eval[int](t, ctx, `window.listReads`); reads != 0 {
		t.Errorf("the page read the list %d times while it followed it", reads)
	}

	var share struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", first, "--json")), &share); err != nil {
		t.Fatal(err)
	}
	guest := newTab(t, 390, 844)
	do(t, guest, chromedp.Navigate(share.URL))
	until(t, guest, "the guest's session", fmt.Sprintf(`page.cur !== null && page.cur.id === %q && page.listSub !== null`, first))
	third := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--title", "Not the guest's"))
	until(t, ctx, "the third session on the owner's page", fmt.Sprintf(`document.querySelector(%q) !== null`, row(third)))
	p.mustRun("rename", first, "Renamed for the guest")
	until(t, guest, "the guest told of its session's new title", `document.querySelector('#title').textContent === 'Renamed for the guest'`)
	if listed := eval[[]string](t, guest, `page.sessions.map(s => s.sessionId)`); len(listed) != 1 || listed[0] != first {
		t.Fatalf("the guest's page lists %q, want only %s", listed, first)
	}
}

// A shell run's output shows on the page, live, as text: the owner's and
// an observing guest's alike, control characters shown and never acted
// on, markup as the characters it is; the run's end shows how it ended.
// A terminal says who controls it, live on every page: nobody, this page,
// a guest by its grant's label, the owner's browser; a page takes
// control, and lets it go, where its level allows.
func TestThePageShowsAShellRunsOutputLiveAndWhoControlsATerminal(t *testing.T) {
	p := newPlace(t)
	p.extraEnv = append(p.extraEnv, "SHELL=/bin/sh")
	fifo := filepath.Join(p.workDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	command := `printf 'first line\n'; printf '\033[31mred\033[0m <b>bold</b> <script>alert(1)</script>\n'; read l < go; echo "$l"`
	args, _ := json.Marshal(map[string]string{"command": command})
	writeScript(t, p, fmt.Sprintf(`{"replies":[{"steps":[{"tool":"bash","arguments":%s,"id":"call-1"}]},{"steps":[{"text":"Ran it."}]}]}`, args))
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	w := p.web()
	owner := newTab(t, 1280, 900)
	do(t, owner, chromedp.Navigate(w.URL+"#token="+w.OwnerToken))
	listed := fmt.Sprintf(`#sessions li[data-session=%q] a`, id)
	until(t, owner, "the session listed", fmt.Sprintf(`document.querySelector(%q) !== null`, listed))
	do(t, owner, chromedp.Click(chromedp.CSS(listed)))
	until(t, owner, "the session", fmt.Sprintf(`page.cur !== null && page.cur.id === %q && page.cur.subId !== null`, id))

	p.mustRun("run", "--session", id, "--approve", "all", "-d", "run it")
	run := `#resources li[data-ref="shell-1"]`
	until(t, owner, "the shell run listed", fmt.Sprintf(`document.querySelector(%q) !== null`, run+" button.show"))
	do(t, owner, chromedp.Click(chromedp.CSS(run+" button.show")))
	until(t, owner, "its output so far", hasText("#run-out", "first line")+" && "+hasText("#run-out", "<b>bold</b>"))
	if got := eval[string](t, owner, `document.querySelector('#run-out').textContent`); !strings.Contains(got, "^[[31mred^[[0m <b>bold</b> <script>alert(1)</script>") {
		t.Fatalf("the output as shown: %q", got)
	}
	if n := eval[int](t, owner, `document.querySelectorAll('#run-out b, #run-out script').length + document.querySelectorAll('#run-out *:not(span)').length`); n != 0 {
		t.Fatalf("the output made %d elements of the page", n)
	}

	var share struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id, "--json")), &share); err != nil {
		t.Fatal(err)
	}
	guest := newTab(t, 390, 844)
	do(t, guest, chromedp.Navigate(share.URL))
	until(t, guest, "the guest's session", fmt.Sprintf(`page.cur !== null && page.cur.id === %q && document.querySelector(%q) !== null`, id, run+" button.show"))
	do(t, guest, chromedp.Click(chromedp.CSS(run+" button.show")))
	until(t, guest, "the output on the guest's page", hasText("#run-out", "first line"))

	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("written-while-watched\n")
	f.Close()
	until(t, owner, "the run's next line and its end, live", hasText("#run-out", "written-while-watched")+" && "+hasText("#run-end", "exited with 0"))
	until(t, guest, "the same on the guest's page", hasText("#run-out", "written-while-watched")+" && "+hasText("#run-end", "exited with 0"))
	if n := eval[int](t, owner, countText("#run-out", "first line")); n != 1 {
		t.Errorf("the output's first line is shown %d times", n)
	}
	shot(t, guest, "page-phone.png", chromedp.CaptureScreenshot())

	// A terminal, and who controls it.
	var control struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id, "--control", "--label", "Ana", "--json")), &control); err != nil {
		t.Fatal(err)
	}
	helper := newTab(t, 1280, 900)
	do(t, helper, chromedp.Navigate(control.URL))
	until(t, helper, "the controlling guest's session", fmt.Sprintf(`page.cur !== null && page.cur.id === %q && page.cur.subId !== null`, id))

	do(t, owner, chromedp.Click(chromedp.CSS("#new-pty")))
	until(t, owner, "the owner's terminal, free", hasText("#pty-who", "nobody controls it")+` && document.querySelector('#pty-take').offsetParent !== null`)
	pty := eval[string](t, owner, `page.cur.pty.ref`)
	showPTY := fmt.Sprintf(`#resources li[data-ref=%q] button.show`, pty)
	until(t, helper, "the terminal listed for the guest", fmt.Sprintf(`document.querySelector(%q) !== null`, showPTY))
	do(t, helper, chromedp.Click(chromedp.CSS(showPTY)))
	until(t, helper, "the guest offered control", hasText("#pty-who", "nobody controls it")+` && document.querySelector('#pty-take').offsetParent !== null`)
	do(t, helper, chromedp.Click(chromedp.CSS("#pty-take")))
	until(t, helper, "the guest in control", hasText("#pty-who", "this page controls it")+` && document.querySelector('#pty-release').offsetParent !== null`)
	until(t, owner, "the owner told the guest controls it", hasText("#pty-who", "guest \u201cAna\u201d controls it")+` && document.querySelector('#pty-take').hidden`)
	do(t, helper, chromedp.Focus(chromedp.CSS("#pty .xterm-helper-textarea")), typeText("echo guest-$((6*7))"), pressEnter())
	until(t, helper, "what the guest typed, on its page", hasText("#pty .xterm-rows", "guest-42"))
	do(t, helper, chromedp.Click(chromedp.CSS(run+" button.show")))
	until(t, helper, "the run's output on the controlling guest's page", hasText("#run-end", "exited with 0"))
	shot(t, helper, "page-desktop.png", chromedp.FullScreenshot(100))
	until(t, owner, "what the guest typed, on the owner's page", termHas("guest-42"))

	do(t, helper, chromedp.Click(chromedp.CSS("#pty-release")))
	until(t, owner, "the terminal free again", hasText("#pty-who", "nobody controls it")+` && document.querySelector('#pty-take').offsetParent !== null`)
	do(t, owner, chromedp.Focus(chromedp.CSS("#pty .xterm-helper-textarea")), typeText("echo owner-$((6*7))"), pressEnter())
	until(t, owner, "the owner in control", hasText("#pty-who", "this page controls it")+" && "+termHas("owner-42"))
	until(t, helper, "the guest told the owner's browser controls it", hasText("#pty-who", "the owner's browser controls it")+` && document.querySelector('#pty-take').hidden`)
	until(t, guest, "the observing guest told so too", hasText(fmt.Sprintf(`#resources li[data-ref=%q] .who-ctl`, pty), "the owner's browser controls it"))
}

// termHas is a page expression: the terminal shown holds text. It reads
// the terminal's buffer, which a tab in the background fills too, though
// it draws nothing until it is in front.
func termHas(text string) string {
	return fmt.Sprintf(`(() => { const p = page.cur && page.cur.pty; if (!p) return false; const b = p.term.buffer.active; for (let i = 0; i < b.length; i++) { const l = b.getLine(i); if (l && l.translateToString(true).includes(%q)) return true; } return false; })()`, text)
}
