package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/protocol"
)

// maxDiagnostics bounds the diagnostics a host keeps.
const maxDiagnostics = 256

// Repeated diagnostics are limited by kind: of one kind, the first
// diagnosticBurst of every diagnosticInterval are written (logged and
// kept); the others are only counted, and when the interval ends one line
// says how many more like them there were. A storm of bad connections
// then costs the log a few lines, not one line each.
const (
	diagnosticBurst    = 10
	diagnosticInterval = 10 * time.Second
)

// Kinds of diagnostic: what a diagnostic is about, for limiting repeats.
const (
	kindAccept     = "accepting connections"
	kindPeer       = "connection from another user"
	kindSandboxed  = "connection from a sandboxed command"
	kindCapacity   = "connection over the limit"
	kindHandshake  = "handshake refused"
	kindViolation  = "protocol violation"
	kindSlowClient = "client not reading"
	kindStalled    = "message not completed in time"
	kindReadBudget = "read budget spent"
	kindConnection = "connection failed"
	kindOperation  = "operation failed"
	kindHost       = "host"
	kindService    = "service"
)

// diagnostics is a bounded ring of recent, redacted host events, each also
// logged. Older entries are dropped and counted; repeats past the limit of
// their kind are suppressed and counted.
type diagnostics struct {
	logger *slog.Logger // constant

	mu         sync.Mutex
	ring       []protocol.Diagnostic // guarded by mu
	next       int                   // guarded by mu: where the next entry goes once full
	dropped    uint64                // guarded by mu
	suppressed uint64                // guarded by mu: every diagnostic suppressed so far
	kinds      map[string]*repeats   // guarded by mu
	summarise  *time.Timer           // guarded by mu: armed while a kind has suppressed diagnostics not yet summarised
	closed     bool                  // guarded by mu: no more limiting
}

// repeats is one kind's count of diagnostics in its current interval.
type repeats struct {
	since      time.Time
	written    int
	suppressed uint64 // not yet summarised
	level      slog.Level
}

func newDiagnostics(logger *slog.Logger) *diagnostics {
	return &diagnostics{logger: logger, kinds: make(map[string]*repeats)}
}

// record writes a diagnostic of kind, unless too many of that kind came
// in this interval: then it counts it.
func (d *diagnostics) record(level slog.Level, kind, msg string) {
	msg = redact.String(msg)
	now := time.Now()
	var lines []logLine
	d.mu.Lock()
	r := d.kinds[kind]
	if r != nil && now.Sub(r.since) >= diagnosticInterval {
		if r.suppressed > 0 {
			lines = append(lines, d.summaryLocked(kind, r, now))
		}
		r = nil
	}
	if r == nil {
		r = &repeats{since: now}
		d.kinds[kind] = r
	}
	if r.written < diagnosticBurst || d.closed {
		r.written++
		d.keepLocked(protocol.Diagnostic{Time: now.UTC(), Level: level.String(), Message: msg})
		lines = append(lines, logLine{level, msg})
	} else {
		if r.suppressed == 0 || level > r.level {
			r.level = level
		}
		r.suppressed++
		d.suppressed++
		if d.summarise == nil {
			d.summarise = time.AfterFunc(r.since.Add(diagnosticInterval).Sub(now), func() { d.flush(false) })
		}
	}
	d.mu.Unlock()
	d.log(lines)
}

// flush writes one summary line for each kind with suppressed diagnostics
// and starts its interval anew. Closing, it also ends the limiting: the
// host is stopping, and what it records from then on is written.
func (d *diagnostics) flush(closing bool) {
	now := time.Now()
	var lines []logLine
	d.mu.Lock()
	if d.summarise != nil {
		d.summarise.Stop()
		d.summarise = nil
	}
	d.closed = d.closed || closing
	for kind, r := range d.kinds {
		if r.suppressed > 0 {
			lines = append(lines, d.summaryLocked(kind, r, now))
			d.kinds[kind] = &repeats{since: now}
		}
	}
	d.mu.Unlock()
	d.log(lines)
}

// logLine is a line for the log, written once mu is let go.
type logLine struct {
	level slog.Level
	msg   string
}

// summaryLocked keeps the summary of kind's suppressed diagnostics and
// returns the line to log.
func (d *diagnostics) summaryLocked(kind string, r *repeats, now time.Time) logLine {
	msg := fmt.Sprintf("%s: %d more like this suppressed since %s", kind, r.suppressed, r.since.UTC().Format(time.TimeOnly))
	d.keepLocked(protocol.Diagnostic{Time: now.UTC(), Level: r.level.String(), Message: msg})
	return logLine{r.level, msg}
}

func (d *diagnostics) log(lines []logLine) {
	for _, l := range lines {
		d.logger.Log(context.Background(), l.level, l.msg)
	}
}

func (d *diagnostics) keepLocked(e protocol.Diagnostic) {
	if len(d.ring) < maxDiagnostics {
		d.ring = append(d.ring, e)
		return
	}
	d.ring[d.next] = e
	d.next = (d.next + 1) % maxDiagnostics
	d.dropped++
}

// recent returns up to limit diagnostics (all when limit is 0), oldest first.
func (d *diagnostics) recent(limit int) protocol.DiagnosticsQueryResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]protocol.Diagnostic, 0, len(d.ring))
	out = append(out, d.ring[d.next:]...)
	out = append(out, d.ring[:d.next]...)
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return protocol.DiagnosticsQueryResult{Diagnostics: out, Dropped: d.dropped, Suppressed: d.suppressed}
}
