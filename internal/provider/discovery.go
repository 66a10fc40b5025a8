package provider

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/llm"
)

// Where a provider's models come from (Info.ModelSource).
const (
	// ModelsListed are the models the provider's service listed.
	ModelsListed = "provider"
	// ModelsBuiltin are the models built into agentd, used while no
	// listing is known (offline, no key yet, the service refused).
	ModelsBuiltin = "built-in"
)

// DefaultListingLifetime is how long a listing counts as fresh: past it,
// the next use of the provider asks the service again in the background,
// and the old listing serves until the new one comes.
const DefaultListingLifetime = 15 * time.Minute

// listingTimeout bounds one listing call.
const listingTimeout = 20 * time.Second

// failedListingPause is how long after a failed listing the next is tried.
const failedListingPause = time.Minute

// DiscoveryConfig configures Discover.
type DiscoveryConfig struct {
	// Dir holds the listings, one file per provider (<name>.json),
	// written atomically. Empty keeps them in memory only.
	Dir string
	// Lifetime is how long a listing is fresh; 0 means
	// DefaultListingLifetime.
	Lifetime time.Duration
	// Follow makes the provider only read the listings another process
	// (the host) writes in Dir, never asking the service itself: a
	// session's worker follows its host's listing.
	Follow bool
	// Logger records failed listings; nil discards.
	Logger *slog.Logger
}

// Discover returns p knowing the models its service lists: when p (or a
// provider it wraps) is a Lister that can list now, its Models are the
// service's listing, kept in cfg.Dir and refreshed in the background once
// older than cfg.Lifetime; until a listing is known they are p's own
// built-in models. A model it lists is accepted (Knows), as is one of its
// names with a dated suffix or without one; once a listing is known, a
// model it does not list is not. Describe takes the service's context
// window where the listing gives one, else p's.
//
// Close stops a listing in flight and waits for it. The returned provider
// keeps p's Configurable, AnyModel, KeySourcer and Describer answers.
func Discover(p llm.Provider, cfg DiscoveryConfig) *Discovering {
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultListingLifetime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Discovering{inner: p, cfg: cfg, ctx: ctx, cancel: cancel}
	d.lister, _ = p.(Lister)
	return d
}

// Discovering is a provider that knows the models its service lists. It
// is safe for concurrent use.
type Discovering struct {
	inner  llm.Provider       // constant
	lister Lister             // constant; nil when inner cannot list
	cfg    DiscoveryConfig    // constant
	ctx    context.Context    // constant; ends with Close
	cancel context.CancelFunc // constant

	wg sync.WaitGroup // the listing in flight

	mu         sync.Mutex
	listing    *listing      // guarded by mu: the latest listing known, of any scope
	fileTime   time.Time     // guarded by mu: the modification time of the file listing came from
	checkedAt  time.Time     // guarded by mu: when the file was last looked at
	refreshing chan struct{} // guarded by mu: closed when the listing in flight ends; nil when none is
	failedAt   time.Time     // guarded by mu: when the last listing failed
	closed     bool          // guarded by mu
}

// listing is a service's answer, as it is kept in the listing file.
type listing struct {
	Scope     string        `json:"scope"`
	FetchedAt time.Time     `json:"fetchedAt"`
	Models    []ListedModel `json:"models"`
}

func (d *Discovering) Name() string { return d.inner.Name() }

// Models returns the listed models when a listing is known, the built-in
// models the service lists first and in their order, the others in the
// service's; else the built-in models.
func (d *Discovering) Models() []string {
	models, _ := d.ModelsAndSource()
	return models
}

// ModelsAndSource returns Models and ModelSource together, from one look
// at the listing.
func (d *Discovering) ModelsAndSource() ([]string, string) {
	l := d.current()
	builtin := d.inner.Models()
	if l == nil {
		return builtin, ModelsBuiltin
	}
	listed := make([]string, 0, len(l.Models))
	for _, m := range l.Models {
		listed = append(listed, m.ID)
	}
	var out []string
	for _, id := range builtin {
		if slices.Contains(listed, id) {
			out = append(out, id)
		}
	}
	for _, id := range listed {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, ModelsListed
}

// ModelSource says where Models come from: ModelsListed or ModelsBuiltin.
func (d *Discovering) ModelSource() string {
	_, source := d.ModelsAndSource()
	return source
}

// Knows reports whether model is one the provider's models name, or one
// of their names with a dated or versioned suffix added or taken away.
func (d *Discovering) Knows(model string) bool {
	for _, id := range d.Models() {
		if id == model || strings.HasPrefix(model, id+"-") || strings.HasPrefix(id, model+"-") {
			return true
		}
	}
	return false
}

// Describe returns the wrapped provider's figures for model, with the
// context window the service listed when it listed one.
func (d *Discovering) Describe(model string) llm.ModelInfo {
	info := llm.Describe(d.inner, model)
	if l := d.current(); l != nil {
		for _, m := range l.Models {
			if m.ID == model && m.ContextWindow > 0 {
				info.ContextWindow, info.Known = m.ContextWindow, true
			}
		}
	}
	return info
}

// Await waits until a listing is known, the one in flight failed, or ctx
// ends: for a caller about to show or check models the first time.
func (d *Discovering) Await(ctx context.Context) {
	if d.current() != nil {
		return
	}
	d.mu.Lock()
	ch := d.refreshing
	d.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// Close stops a listing in flight and waits for it to end.
func (d *Discovering) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	return nil
}

// current returns the listing of the provider's scope now, nil when none
// is known, starting a listing in the background when it is missing or
// stale.
func (d *Discovering) current() *listing {
	if d.lister == nil {
		return nil
	}
	scope := d.lister.ListingScope()
	if scope == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loadLocked()
	l := d.listing
	if l != nil && l.Scope != scope {
		l = nil
	}
	now := time.Now()
	stale := l == nil || now.Sub(l.FetchedAt) > d.cfg.Lifetime
	if stale && !d.cfg.Follow && now.Sub(d.failedAt) > failedListingPause {
		d.refreshLocked(scope)
	}
	return l
}

// fileCheckEvery is how often the listing file is looked at for a change
// another process made: the listing serves many calls a second (every
// host.status lists the providers), and changes every quarter of an hour.
const fileCheckEvery = time.Second

// loadLocked reads the listing file when it changed since it was read,
// looking at most every fileCheckEvery.
func (d *Discovering) loadLocked() {
	if d.cfg.Dir == "" {
		return
	}
	now := time.Now()
	if !d.checkedAt.IsZero() && now.Sub(d.checkedAt) < fileCheckEvery && now.After(d.checkedAt) {
		return
	}
	d.checkedAt = now
	path := d.path()
	fi, err := os.Stat(path)
	if err != nil || fi.ModTime().Equal(d.fileTime) {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var l listing
	if err := json.Unmarshal(data, &l); err != nil || l.Scope == "" {
		d.cfg.Logger.Warn("a kept model listing is unreadable; it is asked for again", "path", path, "err", err)
		d.fileTime = fi.ModTime()
		return
	}
	// What another process wrote is checked as any outside bytes: a
	// model without a name, or named twice, is left out.
	seen := map[string]bool{}
	kept := l.Models[:0]
	for _, m := range l.Models {
		if m.ID != "" && !seen[m.ID] {
			seen[m.ID] = true
			m.ContextWindow = max(m.ContextWindow, 0)
			kept = append(kept, m)
		}
	}
	l.Models = kept
	if len(l.Models) > 0 && (d.listing == nil || !l.FetchedAt.Before(d.listing.FetchedAt)) {
		d.listing = &l
	}
	d.fileTime = fi.ModTime()
}

func (d *Discovering) path() string { return filepath.Join(d.cfg.Dir, d.inner.Name()+".json") }

// refreshLocked starts a listing of scope unless one is in flight.
func (d *Discovering) refreshLocked(scope string) {
	if d.refreshing != nil || d.closed {
		return
	}
	done := make(chan struct{})
	d.refreshing = done
	d.wg.Go(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(d.ctx, listingTimeout)
		models, err := d.lister.ListModels(ctx)
		cancel()
		if err == nil && len(models) == 0 {
			err = errors.New("the service listed no model")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.refreshing = nil
		if err != nil {
			d.failedAt = time.Now()
			if d.ctx.Err() == nil {
				d.cfg.Logger.Warn("listing the provider's models failed; the models known before stand", "provider", d.inner.Name(), "err", err)
			}
			return
		}
		d.listing = &listing{Scope: scope, FetchedAt: time.Now(), Models: models}
		d.storeLocked()
	})
}

// storeLocked keeps the listing in its file.
func (d *Discovering) storeLocked() {
	if d.cfg.Dir == "" {
		return
	}
	data, err := json.MarshalIndent(d.listing, "", "  ")
	if err == nil {
		if err = os.MkdirAll(d.cfg.Dir, 0o700); err == nil {
			err = atomicfile.Write(d.path(), append(data, '\n'), 0o600)
		}
	}
	if err != nil {
		d.cfg.Logger.Warn("keeping the model listing", "provider", d.inner.Name(), "err", err)
		return
	}
	if fi, err := os.Stat(d.path()); err == nil {
		d.fileTime = fi.ModTime()
	}
}

// Configured reports whether the wrapped provider is configured.
func (d *Discovering) Configured() bool { return configured(d.inner) }

// ConfigEnv names the wrapped provider's environment variable.
func (d *Discovering) ConfigEnv() string {
	if c, ok := d.inner.(Configurable); ok {
		return c.ConfigEnv()
	}
	return ""
}

// AnyModel reports whether the wrapped provider serves models it does
// not list.
func (d *Discovering) AnyModel() bool { return anyModel(d.inner) }

// KeySource says where the wrapped provider's key comes from.
func (d *Discovering) KeySource() string {
	if k, ok := d.inner.(KeySourcer); ok {
		return k.KeySource()
	}
	return ""
}

func (d *Discovering) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	return d.inner.Stream(ctx, req, emit)
}
