package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/protocol"
)

// maxDiagnostics bounds the diagnostics a host keeps.
const maxDiagnostics = 256

// diagnostics is a bounded ring of recent, redacted host events. Older
// entries are dropped and counted.
type diagnostics struct {
	logger *slog.Logger // constant

	mu      sync.Mutex
	ring    []protocol.Diagnostic // guarded by mu
	next    int                   // guarded by mu: where the next entry goes once full
	dropped uint64                // guarded by mu
}

func (d *diagnostics) record(level slog.Level, msg string) {
	msg = redact.String(msg)
	d.logger.Log(context.Background(), level, msg)
	e := protocol.Diagnostic{Time: time.Now().UTC(), Level: level.String(), Message: msg}
	d.mu.Lock()
	defer d.mu.Unlock()
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
	return protocol.DiagnosticsQueryResult{Diagnostics: out, Dropped: d.dropped}
}
