package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// goalPage bounds the web page's first screen of the attached session.
const goalPage = 300 * time.Millisecond

// firstScreenScript, run in every document the tab loads before its own
// scripts, notes when the transcript first shows the session's last reply,
// in milliseconds since the navigation began.
var firstScreenScript = `window.__firstScreen = 0;
new MutationObserver((_, obs) => {
  const t = document.getElementById('transcript');
  if (t && t.textContent.includes(` + strconv.Quote(lastReplyMark) + `)) {
    window.__firstScreen = performance.now();
    obs.disconnect();
  }
}).observe(document, {childList: true, subtree: true, characterData: true});`

// pageFirstScreen times the web page, in headless Chromium, from the
// navigation to the session's page until its transcript shows the last
// reply, runs times, the owner logged in once before.
func (b *bench) pageFirstScreen(ctx context.Context, c *client.Conn, id string, runs int) (summary, error) {
	l, err := client.Call(ctx, c, protocol.OpHostWebStart, protocol.WebStartInput{})
	if err != nil {
		return summary{}, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	tab, cancel := context.WithTimeout(tab, 5*time.Minute)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.Navigate(l.URL+"#token="+l.OwnerToken)); err != nil {
		return summary{}, fmt.Errorf("chromium (apt-get install -y chromium): %w", err)
	}
	if _, err := evalUntil[bool](tab, `page.principal !== null`); err != nil {
		return summary{}, fmt.Errorf("logging in: %w", err)
	}
	if err := chromedp.Do(tab,
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: firstScreenScript})
			return err
		}),
	); err != nil {
		return summary{}, fmt.Errorf("chromium (apt-get install -y chromium): %w", err)
	}
	var times []time.Duration
	for range runs {
		if err := chromedp.Do(tab, chromedp.Navigate("about:blank"), chromedp.Navigate(l.URL+"#/s/"+id)); err != nil {
			return summary{}, err
		}
		ms, err := evalUntil[float64](tab, `window.__firstScreen`)
		if err != nil {
			return summary{}, fmt.Errorf("the page's first screen: %w", err)
		}
		times = append(times, time.Duration(ms*float64(time.Millisecond)))
	}
	return summarize(times), nil
}

// evalUntil evaluates expr in the tab until it is truthy, and returns it.
// The page notes its own times, so how often this looks changes no figure.
func evalUntil[T comparable](tab context.Context, expr string) (T, error) {
	var zero T
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		var v T
		if v, err = chromedp.Run(tab, chromedp.Evaluate[T](expr)); err == nil && v != zero {
			return v, nil
		}
		select {
		case <-tab.Done():
			return zero, errors.Join(tab.Err(), err)
		case <-tick.C:
		}
	}
}
