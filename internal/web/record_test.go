package web

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/guest"
)

// A listener records its address and its logins in the home: a listener
// started later from the record knows a cookie of the first; once
// forgotten, nothing is recorded.
func TestALoginOutlivesItsListener(t *testing.T) {
	home := t.TempDir()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	l, token, err := Start(Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, l.Info().URL+"login", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(res.Cookies()) != 1 || res.StatusCode != http.StatusNoContent {
		t.Fatalf("the login: %s %v", res.Status, res.Cookies())
	}
	cookie := res.Cookies()[0]
	if cookie.Expires.IsZero() {
		t.Error("the login's cookie has no expiry")
	}
	if b, err := os.ReadFile(filepath.Join(home, FileName)); err != nil || strings.Contains(string(b), cookie.Value) || strings.Contains(string(b), token) {
		t.Fatalf("the record holds a secret, or none is: %v\n%s", err, b)
	}
	l.Close()

	rec, ok, err := Recorded(home)
	if err != nil || !ok || rec.Listen != l.Info().Address {
		t.Fatalf("the record: %+v %v %v, want it on %s", rec, ok, err, l.Info().Address)
	}
	l2, _, err := Start(Config{Home: home, Listen: rec.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	status := func(c *http.Cookie) int {
		req, _ := http.NewRequest(http.MethodGet, l2.Info().URL+"ws", nil)
		if c != nil {
			req.AddCookie(c)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	// Known, the cookie passes to the WebSocket's upgrade, which a plain
	// GET fails.
	if got := status(cookie); got == http.StatusUnauthorized {
		t.Fatalf("the cookie from the first listener: %d", got)
	}
	if got := status(&http.Cookie{Name: CookieName, Value: "agentd_unknown"}); got != http.StatusUnauthorized {
		t.Fatalf("an unknown cookie: %d, want 401", got)
	}

	if err := l2.Forget(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Recorded(home); ok || err != nil {
		t.Fatalf("the record once forgotten: %v %v", ok, err)
	}
}

// A login made while a listener hands over to the next is made at the
// next: the one that stopped accepting refuses it, 503 with its
// connection closed, and leaves the owner's token unspent; the next
// listener, started from the record, accepts that token, and a listener
// after it knows the cookie.
func TestALoginDuringAHandOffIsMadeAtTheNextListener(t *testing.T) {
	home := t.TempDir()
	grants, err := guest.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	l, token, err := Start(Config{Home: home, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A connection kept alive from before the hand-off.
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	res, err := hc.Get(l.Info().URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	l.StopAccepting()

	login := func(url string, hc *http.Client) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"login", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	if res := login(l.Info().URL, hc); res.StatusCode != http.StatusServiceUnavailable || !res.Close || len(res.Cookies()) != 0 {
		t.Fatalf("a login at the listener that stopped accepting: %s, close %v, cookies %v; want 503, closed, none", res.Status, res.Close, res.Cookies())
	}

	rec, ok, err := Recorded(home)
	if err != nil || !ok {
		t.Fatalf("the record: %v %v", ok, err)
	}
	rec.Home, rec.Grants = home, grants
	l2, again, err := Start(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if again != "" {
		t.Fatalf("a listener taking the recorded one's place issued a token of its own")
	}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res = login(l2.Info().URL, plain)
	if res.StatusCode != http.StatusNoContent || len(res.Cookies()) != 1 {
		t.Fatalf("the owner's token, unspent, at the next listener: %s %v", res.Status, res.Cookies())
	}
	cookie := res.Cookies()[0]
	if res := login(l2.Info().URL, plain); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the owner's token a second time: %s, want 401", res.Status)
	}
	l2.StopAccepting()

	rec, _, _ = Recorded(home)
	rec.Home, rec.Grants = home, grants
	l3, _, err := Start(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	req, _ := http.NewRequest(http.MethodGet, l3.Info().URL+"ws", nil)
	req.AddCookie(cookie)
	res, err = plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusUnauthorized {
		t.Fatalf("the cookie of the login made during the hand-off, at the listener after: %s", res.Status)
	}
	if res := login(l3.Info().URL, plain); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the owner's token, spent, at the listener after: %s, want 401", res.Status)
	}
}
