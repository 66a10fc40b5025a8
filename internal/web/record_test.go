package web

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
