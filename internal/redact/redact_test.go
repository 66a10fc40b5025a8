package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestStringRemovesPlantedSecrets(t *testing.T) {
	cases := []struct{ in, secret string }{
		{"api_key=sk-connection-secret123", "sk-connection-secret123"},
		{"ANTHROPIC_API_KEY: abcdef0123456789", "abcdef0123456789"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"},
		{"failed with key sk-ant-api03-AAAAbbbbCCCCdddd", "sk-ant-api03-AAAAbbbbCCCCdddd"},
		{`{"token":"tok-123456789"}`, "tok-123456789"},
		{"password=hunter2 user=bob", "hunter2"},
		{"aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"},
		{"github ghp_abcdefghijklmnop", "ghp_abcdefghijklmnop"},
	}
	for _, c := range cases {
		got := String(c.in)
		if strings.Contains(got, c.secret) {
			t.Errorf("String(%q) = %q: still holds the secret", c.in, got)
		}
		if !strings.Contains(got, Marker) {
			t.Errorf("String(%q) = %q: no marker", c.in, got)
		}
	}
}

func TestStringKeepsOrdinaryText(t *testing.T) {
	for _, s := range []string{"connection closed", "turn.query failed: not_found", "state=ready pid=42", "max_tokens: 8192 is too large", "wait... then **bold** text", "task-list... done", "2 * 3 = 6"} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q", s, got)
		}
	}
}

func TestHandlerRedactsMessagesAndAttributes(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil))).With("auth", "Bearer abc.def.ghi")
	log.Error("call failed api_key=sk-planted-secret-1", "err", errors.New("token=planted-2"),
		slog.Group("req", "header", "x-api-key: sk-planted-secret-3"))
	out := buf.String()
	for _, secret := range []string{"sk-planted-secret-1", "planted-2", "sk-planted-secret-3", "abc.def.ghi"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log line holds %q: %s", secret, out)
		}
	}
}

func TestStringRemovesMaskedKeysAServiceEchoes(t *testing.T) {
	cases := []struct{ in, tail string }{
		{"Incorrect API key provided: sk-proj-abc1********************************wxyz. You can find your API key at …", "wxyz"},
		{"invalid key sk-...Q7rT", "Q7rT"},
		{"key ending in ************9f3e was revoked", "9f3e"},
	}
	for _, c := range cases {
		got := String(c.in)
		if strings.Contains(got, c.tail) || !strings.Contains(got, Marker) {
			t.Errorf("String(%q) = %q: the key's tail %q is still there", c.in, got, c.tail)
		}
	}
}

func TestRegisteredSecretsAndTheirTailsAreRemoved(t *testing.T) {
	const key = "Zq81xLmNoPqrStUv42kk" // no known key shape
	Register(key)
	Register("short") // too short to register: ordinary words stay
	for _, in := range []string{
		"the key " + key + " failed",
		"unauthorized: key …UvZ" + key[len(key)-8:] + " is not valid",
	} {
		got := String(in)
		if strings.Contains(got, key[len(key)-minSuffix:]) || !strings.Contains(got, Marker) {
			t.Errorf("String(%q) = %q: the registered key or its tail is still there", in, got)
		}
	}
	if got := String("a short answer"); got != "a short answer" {
		t.Errorf("a secret below the minimum was registered: %q", got)
	}
}

func TestSecretsRemovesRegisteredKeysAndLeavesKeyShapesAlone(t *testing.T) {
	const key = "plain-registered-Fh38sKdLzXq"
	Register(key)
	if got := Secrets("the key " + key + " here"); got != "the key "+Marker+" here" {
		t.Errorf("Secrets = %q", got)
	}
	ordinary := "api_key=example token: abc sk-shaped-but-unknown-123456"
	if got := Secrets(ordinary); got != ordinary {
		t.Errorf("Secrets(%q) = %q: content with a key's shape is changed", ordinary, got)
	}
	b := []byte(ordinary)
	if got := Bytes(b); &got[0] != &b[0] {
		t.Error("Bytes copied a text that holds no secret")
	}
	if got := Bytes([]byte("{\"out\":\"" + key + "\"}")); string(got) != "{\"out\":\""+Marker+"\"}" {
		t.Errorf("Bytes = %q", got)
	}
}

// streamOf runs pieces through a Stream and returns all it let out.
func streamOf(pieces ...string) string {
	var s Stream
	var out strings.Builder
	for _, p := range pieces {
		out.Write(s.Redact([]byte(p)))
	}
	out.Write(s.Flush())
	return out.String()
}

func TestStreamRemovesASecretCutAnywhereInPieces(t *testing.T) {
	const key = "sk-ant-stream-Vb52nMqWxYzA"
	Register(key)
	text := "before " + key + " middle " + key + "\nafter sk-ant- and sk-"
	// Ends of pieces that went out before the secret was seen whole may
	// show its first bytes (fewer than minHold); never more.
	check := func(got string, cuts ...int) {
		t.Helper()
		if strings.Contains(got, key[minHold-1:]) || strings.Contains(got, key[len(key)-minSuffix:]) {
			t.Fatalf("cut at %v: %q holds the key", cuts, got)
		}
		if strings.Count(got, Marker) != 2 || !strings.HasSuffix(got, "\nafter sk-ant- and sk-") || !strings.HasPrefix(got, "before ") {
			t.Fatalf("cut at %v: %q", cuts, got)
		}
	}
	check(streamOf(text))
	for i := range len(text) {
		check(streamOf(text[:i], text[i:]), i)
		for j := i; j < len(text); j++ {
			check(streamOf(text[:i], text[i:j], text[j:]), i, j)
		}
	}
	// One byte at a time, as a terminal echoes a key typed.
	var bytewise []string
	for _, c := range text {
		bytewise = append(bytewise, string(c))
	}
	check(streamOf(bytewise...))
}

func TestStreamHoldsNothingBackOfOrdinaryOutput(t *testing.T) {
	Register("sk-ant-held-Qw81eRtYuIoP")
	var s Stream
	for _, p := range []string{"a task", "s", "k", "-", "an ordinary line\n", "sk-ant"} {
		if got := string(s.Redact([]byte(p))); got != p {
			t.Fatalf("Redact(%q) = %q: output held back or changed", p, got)
		}
	}
}

func TestHasTailFindsATailWhereverItsSeldomByteIs(t *testing.T) {
	for _, c := range []struct {
		s, tail string
		want    bool
	}{
		{"abcdef", "abcdef", true},
		{"xx abcdef", "abcdef", true},
		{"abcdef xx", "abcdef", true},
		{"ab3def", "ab3def", true},
		{"x3def ab3def", "ab3def", true},
		{"ab3de", "ab3def", false},
		{"3defab3de", "ab3def", false},
		{"oooXyz oooXyzw", "ooXyzw", true},
		{"oooXyz", "ooXyzw", false},
		{"", "abcdef", false},
	} {
		if got := hasTail(c.s, c.tail); got != c.want {
			t.Errorf("hasTail(%q, %q) = %v", c.s, c.tail, got)
		}
		if got := hasTail([]byte(c.s), c.tail); got != c.want {
			t.Errorf("hasTail([]byte(%q), %q) = %v", c.s, c.tail, got)
		}
	}
}
