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
	list []string // guarded by mu
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
	secrets.list = append(secrets.list, secret)
	slices.SortFunc(secrets.list, func(a, b string) int { return len(b) - len(a) })
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
		tail := secret[len(secret)-minSuffix:]
		switch s := any(s).(type) {
		case string:
			if strings.Contains(s, tail) {
				return true
			}
		case []byte:
			if bytes.Contains(s, []byte(tail)) {
				return true
			}
		}
	}
	return false
}

// minHold is the shortest start of a secret a Stream holds back at the end
// of a piece. Shorter starts go out at once, so that a terminal's echo of
// a key stroke is never held; the rest of a secret they start is
// recognised at the start of the next piece.
const minHold = 4

// Stream removes the registered secrets from output that arrives in
// pieces, a secret cut in two by the end of a piece included: the end of
// a piece that may begin a secret (minHold bytes of it or more) is held
// back until the next piece shows whether it does; the rest of a secret
// whose first bytes went out with the last piece is replaced at the start
// of the next. The zero Stream is ready to use; it is not safe for
// concurrent use.
type Stream struct {
	held []byte // the end of the last piece, held back
	sent []byte // the last bytes that went out, up to minHold-1
}

// Redact returns what of p (after what was held back) may go out now, the
// registered secrets replaced by Marker. The result may share memory with
// p and is valid until the next call.
func (s *Stream) Redact(p []byte) []byte {
	secrets.mu.RLock()
	list := secrets.list
	secrets.mu.RUnlock()
	if len(list) == 0 && len(s.held) == 0 {
		return p
	}
	data := p
	if len(s.held) > 0 {
		data = append(s.held, p...)
		s.held = nil
	}
	data = s.restOfSent(data, list)
	keep := len(data)
	for _, secret := range list {
		keep = min(keep, len(data)-partialEnd(data, secret))
	}
	if keep < len(data) {
		s.held = append([]byte(nil), data[keep:]...)
	}
	out := Bytes(data[:keep])
	s.remember(out)
	return out
}

// Flush returns what is held back, at the end of the output.
func (s *Stream) Flush() []byte {
	out := Bytes(s.held)
	s.held = nil
	s.remember(out)
	return out
}

// remember keeps the last bytes of out, which went out, for restOfSent.
func (s *Stream) remember(out []byte) {
	if len(out) >= minHold-1 {
		s.sent = append(s.sent[:0], out[len(out)-(minHold-1):]...)
		return
	}
	s.sent = append(s.sent, out...)
	if len(s.sent) > minHold-1 {
		s.sent = s.sent[len(s.sent)-(minHold-1):]
	}
}

// restOfSent replaces the start of data when it is the rest of a secret
// whose first bytes (fewer than minHold) ended what went out before.
func (s *Stream) restOfSent(data []byte, list []string) []byte {
	for _, secret := range list {
		for k := min(len(s.sent), minHold-1); k > 0; k-- {
			if string(s.sent[len(s.sent)-k:]) == secret[:k] && strings.HasPrefix(string(data), secret[k:]) {
				return append([]byte(Marker), data[len(secret)-k:]...)
			}
		}
	}
	return data
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
