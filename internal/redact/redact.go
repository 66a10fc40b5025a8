// Package redact removes secrets from text before it reaches a log, a
// diagnostic or an error message a client can read. It knows the shapes of
// API keys (whole, or masked as services echo them: sk-abc***wxyz),
// bearer tokens and key=value credentials, and the keys this process was
// told of with Register; it knows nothing of where the text goes.
package redact

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Marker replaces every secret.
const Marker = "[redacted]"

type pattern struct {
	re   *regexp.Regexp
	repl string
}

// patterns are compiled on first use: most agentd processes are short
// client commands that never redact.
var patterns = sync.OnceValue(func() []pattern {
	return []pattern{
		// key=value and key: value pairs whose key names a credential.
		{regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|passwd|credential)s?["']?\s*[=:]\s*["']?)[^\s"'&,;]+`), "${1}" + Marker},
		// A bare "token" key, but not a word ending in it (max_tokens: 8192).
		{regexp.MustCompile(`(?i)(\btokens?["']?\s*[=:]\s*["']?)[^\s"'&,;]+`), "${1}" + Marker},
		// Authorization headers and bearer tokens.
		{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+`), "${1}" + Marker},
		// Provider key shapes: sk-…, sk-ant-…, xoxb-…, ghp_…, AKIA…
		{regexp.MustCompile(`\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}`), Marker},
		{regexp.MustCompile(`\b(?:xox[abpr]|gh[pousr])[-_][A-Za-z0-9_-]{8,}`), Marker},
		{regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), Marker},
		// A key a service echoed masked, its prefix and its distinctive
		// last characters around a run of stars or dots:
		// "sk-proj-abc*****************wxyz", "sk-...wxyz".
		{regexp.MustCompile(`\b(?:sk|pk|rk)-[A-Za-z0-9_-]*(?:\*{2,}|\.{3}|…)[A-Za-z0-9_*.-]*`), Marker},
		// A masked key without a known prefix: four or more stars and
		// what follows them.
		{regexp.MustCompile(`\*{4,}[A-Za-z0-9_-]+`), Marker},
	}
})

// minSuffix is the length of the end of a registered secret that String
// removes on its own: long enough that ordinary text does not hold it by
// chance, short enough to catch the tail a service shows of a key.
const minSuffix = 6

// minSecret is the shortest secret Register keeps: shorter strings would
// redact ordinary words.
const minSecret = 12

// secrets are the values Register was given, longest first.
var secrets struct {
	mu   sync.RWMutex
	list []string // guarded by mu; replaced whole, never changed in place
}

// Register makes String remove secret, and any run of its last minSuffix
// or more characters, from every text from now on, in the whole process.
// It is for the values of API keys the process holds, which may have no
// recognisable shape. Secrets shorter than 12 bytes are ignored.
func Register(secret string) {
	secret = strings.TrimSpace(secret)
	if len(secret) < minSecret {
		return
	}
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	if slices.Contains(secrets.list, secret) {
		return
	}
	// A new list: a Stream reads the one it got without the lock.
	list := append(slices.Clone(secrets.list), secret)
	slices.SortFunc(list, func(a, b string) int { return len(b) - len(a) })
	secrets.list = list
}

// String returns s with every secret it recognises replaced by Marker.
func String(s string) string {
	s = registered(s)
	for _, p := range patterns() {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// registered removes the registered secrets from s: each whole, then each
// one's tail of minSuffix characters, which is all a service may show of
// it.
func registered(s string) string {
	secrets.mu.RLock()
	defer secrets.mu.RUnlock()
	for _, secret := range secrets.list {
		s = strings.ReplaceAll(s, secret, Marker)
	}
	for _, secret := range secrets.list {
		s = strings.ReplaceAll(s, secret[len(secret)-minSuffix:], Marker)
	}
	return s
}

// Secrets returns s with every registered secret, and every run of its
// last characters String would remove, replaced by Marker. Unlike String
// it leaves the shapes of keys and key=value pairs alone: it is for
// content (a transcript, a command's output, a session's deltas), where
// those shapes are ordinary text and only the keys this process holds
// must not pass.
func Secrets(s string) string {
	if !holds(s) {
		return s
	}
	return registered(s)
}

// Bytes is Secrets for b. It returns b itself, without copying, when b
// holds no registered secret.
func Bytes(b []byte) []byte {
	if !holds(b) {
		return b
	}
	return []byte(registered(string(b)))
}

// holds reports whether s holds the tail of a registered secret, as every
// text with a whole one does.
func holds[T string | []byte](s T) bool {
	secrets.mu.RLock()
	defer secrets.mu.RUnlock()
	for _, secret := range secrets.list {
		if hasTail(s, secret[len(secret)-minSuffix:]) {
			return true
		}
	}
	return false
}

// hasTail reports whether s holds tail. It looks first for the byte of
// tail that output holds seldom (a digit, else a capital): a key's tail
// often starts with a letter ordinary text is full of, which a plain
// search would stop at everywhere.
func hasTail[T string | []byte](s T, tail string) bool {
	at := 0
	for i := range len(tail) {
		if c := tail[i]; c >= '0' && c <= '9' {
			at = i
			break
		} else if c >= 'A' && c <= 'Z' && at == 0 {
			at = i
		}
	}
	for from := at; from < len(s); {
		i := indexByte(s[from:], tail[at])
		if i < 0 {
			return false
		}
		start := from + i - at
		if start+len(tail) <= len(s) && string(s[start:start+len(tail)]) == tail {
			return true
		}
		from += i + 1
	}
	return false
}

func indexByte[T string | []byte](s T, c byte) int {
	switch s := any(s).(type) {
	case string:
		return strings.IndexByte(s, c)
	case []byte:
		return bytes.IndexByte(s, c)
	}
	return -1
}

// minHold is how much of a secret's start a Stream must have seen before
// it holds output back: a shorter start goes out at once, so that a
// terminal's echo of ordinary text is not held, and the rest of the
// secret is recognised as it comes. It is long enough to cover the
// prefixes keys share (sk-ant-, sk-proj-), which is all that goes out of
// a secret cut in pieces.
const minHold = 8

// Stream removes the registered secrets from output that arrives in
// pieces, a secret cut in two (or more) by the ends of pieces included:
// output that may be a secret's start, minHold bytes of it or more, is
// held back until the next piece shows whether it is; a secret whose
// first bytes went out before is replaced from where the output goes on
// with it. The zero Stream is ready to use; it is not safe for concurrent
// use.
type Stream struct {
	held []byte // output held back: it may be part of a secret
	sent []byte // the last bytes that went out, fewer than the longest secret's
}

// Redact returns what of p (after what was held back) may go out now, the
// registered secrets replaced by Marker. The result may share memory with
// p and is valid until the next call.
func (s *Stream) Redact(p []byte) []byte {
	secrets.mu.RLock()
	list := secrets.list // replaced, never changed in place
	secrets.mu.RUnlock()
	if len(list) == 0 && len(s.held) == 0 {
		return p
	}
	data := p
	if len(s.held) > 0 {
		data = append(s.held, p...)
		s.held = nil
	}
	switch n, whole := s.continued(data, list); {
	case n > 0 && !whole:
		s.held = append([]byte(nil), data...)
		return nil
	case n > 0:
		data = append([]byte(Marker), data[n:]...)
	}
	keep := len(data)
	for _, secret := range list {
		keep = min(keep, len(data)-partialEnd(data, secret))
	}
	if keep < len(data) {
		s.held = append([]byte(nil), data[keep:]...)
	}
	out := Bytes(data[:keep])
	s.remember(out, list)
	return out
}

// Flush returns what is held back, at the end of the output.
func (s *Stream) Flush() []byte {
	out := Bytes(s.held)
	s.held = nil
	return out
}

// continued reports whether data goes on with a secret whose first bytes
// went out last: n is how many bytes of data are of that secret, and
// whole whether they end it (else all of data is its next part, minHold
// bytes of it or more seen).
func (s *Stream) continued(data []byte, list []string) (n int, whole bool) {
	for _, secret := range list {
		for k := min(len(s.sent), len(secret)-1); k > 0; k-- {
			if !bytes.HasSuffix(s.sent, []byte(secret[:k])) {
				continue
			}
			rest := secret[k:]
			switch {
			case bytes.HasPrefix(data, []byte(rest)):
				return len(rest), true
			case k+len(data) >= minHold && strings.HasPrefix(rest, string(data)):
				return len(data), false
			}
		}
	}
	return 0, false
}

// remember keeps the last bytes of out, which went out, for continued.
func (s *Stream) remember(out []byte, list []string) {
	keep := 0
	for _, secret := range list {
		keep = max(keep, len(secret)-1)
	}
	s.sent = append(s.sent, out...)
	if len(s.sent) > keep {
		s.sent = append(s.sent[:0], s.sent[len(s.sent)-keep:]...)
	}
}

// partialEnd returns the length of the longest end of data, minHold bytes
// or more and shorter than secret, that secret starts with; 0 when none.
func partialEnd(data []byte, secret string) int {
	from := max(0, len(data)-len(secret)+1)
	for i := from; i <= len(data)-minHold; i++ {
		if data[i] == secret[0] && strings.HasPrefix(secret, string(data[i:])) {
			return len(data) - i
		}
	}
	return 0
}

// Handler wraps an slog.Handler so that messages and string attributes are
// redacted before they are written.
type Handler struct{ next slog.Handler }

// NewHandler returns a redacting Handler around next.
func NewHandler(next slog.Handler) *Handler { return &Handler{next: next} }

// Enabled reports whether next handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle redacts r and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs returns a Handler whose attributes are redacted.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = attr(a)
	}
	return &Handler{next: h.next.WithAttrs(red)}
}

// WithGroup returns a Handler that opens a group.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name)}
}

func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		red := make([]any, len(group))
		for i, g := range group {
			red[i] = attr(g)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, String(err.Error()))
		}
		return slog.String(a.Key, String(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
