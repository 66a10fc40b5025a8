package guest

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// A grant's token carries at least 128 random bits and is kept only as
// its hash, in a file of the home of mode 0600 that a store opened anew
// (a replacing host's) reads: the token proves the grant there too, and
// a revocation holds there too.
func TestGrantsAreKeptAsHashesInTheHomeAndSurviveAReopening(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home)
	if err != nil {
		t.Fatal(err)
	}
	g, token, err := s.Create("s-1", protocol.GrantObserve, "Ana", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, tokenPrefix))
	if err != nil || len(raw)*8 < 128 {
		t.Fatalf("token %q carries %d bits: %v", token, len(raw)*8, err)
	}
	kept, _, err := s.Create("s-2", protocol.GrantControl, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, FileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the grants file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), token) || !strings.Contains(string(b), HashToken(token)) {
		t.Fatal("the grants file holds the token, or not its hash")
	}

	again, err := Open(home)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Authenticate(token); err != nil || got.GrantID != g.GrantID || got.SessionID != "s-1" || got.Label != "Ana" {
		t.Fatalf("the reopened store authenticates %+v %v", got, err)
	}
	if _, err := again.Revoke(g.GrantID); err != nil {
		t.Fatal(err)
	}
	third, err := Open(home)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := third.Authenticate(token); err != ErrBadToken {
		t.Fatalf("a revoked grant's token after a reopening: %v", err)
	}
	if l := third.List(); len(l) != 1 || l[0].GrantID != kept.GrantID {
		t.Fatalf("the grants after the revocation: %+v", l)
	}
}

// A grant past its expiry proves nothing and is listed no more; a wrong
// token, a near one or an empty one proves nothing.
func TestAnExpiredGrantAndAWrongTokenProveNothing(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	until := now.Add(time.Hour)
	g, token, err := s.Create("s-1", protocol.GrantObserve, "", &until)
	if err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []string{"", "agentd_", token[:len(token)-1], token + "A", strings.ToUpper(token)} {
		if _, err := s.Authenticate(wrong); err != ErrBadToken {
			t.Errorf("token %q: %v", wrong, err)
		}
	}
	if _, err := s.Authenticate(token); err != nil {
		t.Fatal(err)
	}
	now = until
	if _, err := s.Authenticate(token); err != ErrBadToken {
		t.Fatalf("an expired grant's token: %v", err)
	}
	if _, ok := s.Get(g.GrantID); ok || len(s.List()) != 0 {
		t.Fatal("an expired grant is still in force")
	}
}

// Bad input to Create is refused with an error naming the field.
func TestABadGrantIsRefusedNamingTheField(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	cases := []struct {
		session, level, label string
		expires               *time.Time
		field                 string
	}{
		{"s-1", "admin", "", nil, `"level"`},
		{"s-1", "", "", nil, `"level"`},
		{"", protocol.GrantObserve, "", nil, `"sessionId"`},
		{"s-1", protocol.GrantObserve, "two\nlines", nil, `"label"`},
		{"s-1", protocol.GrantObserve, strings.Repeat("x", 201), nil, `"label"`},
		{"s-1", protocol.GrantObserve, "", &past, `"expiresAt"`},
	}
	for _, c := range cases {
		_, _, err := s.Create(c.session, c.level, c.label, c.expires)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Create(%q, %q, %q): %v, want an error naming %s", c.session, c.level, c.label, err, c.field)
		}
	}
	if len(s.List()) != 0 {
		t.Fatal("a refused grant was kept")
	}
}

// A damaged grants file is refused, naming it, rather than taken for a
// home without grants.
func TestADamagedGrantsFileIsRefused(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, FileName), []byte(`{"grants":[{"grantId":"g-1"}]}`), 0o600)
	if _, err := Open(home); err == nil || !strings.Contains(err.Error(), FileName) {
		t.Fatalf("a grant without its session or hash: %v", err)
	}
	os.WriteFile(filepath.Join(home, FileName), []byte(`{`), 0o600)
	if _, err := Open(home); err == nil {
		t.Fatal("a file that is not JSON was read")
	}
}
