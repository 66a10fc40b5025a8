// Package redact removes secrets from text before it reaches a log, a
// diagnostic or an error message a client can read. It knows the shapes of
// API keys (whole, or masked as services echo them: sk-abc***wxyz),
// bearer tokens and key=value credentials, and the keys this process was
// told of with Register; it knows nothing of where the text goes.
package redact

import (
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
