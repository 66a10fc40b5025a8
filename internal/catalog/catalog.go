package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadWorkers bounds how many headers Open reads at once.
const loadWorkers = 8

// Catalog is the session catalog of one home.
//
// Reads (List, Get, Resolve, Settings) are answered from memory. A change
// that changes something bumps the header's MetadataRevision, sets its
// UpdatedAt and is on disk before it returns; one that changes nothing
// returns the header as it is and writes nothing.
//
// A change marks its session (or the settings) busy under mu, writes the
// file with mu released, then records the result under mu: changes of one
// session are serialized, changes of different sessions write in parallel,
// and no reader waits for a disk. Memory holds only what is on disk.
type Catalog struct {
	// Constant after Open.
	home  string
	dir   string           // <home>/sessions
	now   func() time.Time // the clock; UTC, no monotonic reading
	newID func() string
	log   *slog.Logger
	// onChange is told of each session changed, created or removed.
	onChange func(id string)
	// settingsMoved is where Open moved an unreadable settings.json, if
	// it did.
	settingsMoved string

	// mu guards the fields below.
	mu sync.Mutex
	// idle (on mu) is broadcast whenever an entry or the settings stop
	// being busy, a removed entry or a failed creation included.
	idle sync.Cond
	// entries holds every session folder by id, those being created
	// included. Guarded by mu.
	entries map[string]*entry
	// settings is the content of settings.json. Guarded by mu.
	settings Settings
	// settingsBusy is set while settings.json is being written. Guarded
	// by mu.
	settingsBusy bool
	// copies maps a session id to the other folders whose header names
	// it (a folder copied by hand, or restored from a backup beside the
	// original): a session so claimed is not selectable until one is
	// gone. Read at Open; a removed folder leaves it. Guarded by mu.
	copies map[string][]string
}

// entry is one session folder. Its fields are guarded by Catalog.mu.
type entry struct {
	// h is the header as on disk. A stored header is never changed (a
	// change stores a new one), so a reader may use it after letting go
	// of mu.
	h *Header
	// busy is set while the folder is being written or removed.
	busy bool
	// creating is set until Create has put the folder in place; such an
	// entry only reserves its id and is invisible to readers.
	creating bool
}

// Option configures Open.
type Option func(*Catalog)

// WithLogger makes the catalog log to l what goes wrong without failing
// the call in hand: a leftover that cannot be removed, a removed session's
// files that cannot be deleted. Without it, those go unlogged.
func WithLogger(l *slog.Logger) Option {
	return func(c *Catalog) {
		if l != nil {
			c.log = l
		}
	}
}

// WithOnChange has fn told the id of each session whose header a change
// stored (Create, every change of a header, Restore) or that Remove
// removed, once the catalog has let go of its lock: fn may call the
// catalog.
func WithOnChange(fn func(id string)) Option {
	return func(c *Catalog) { c.onChange = fn }
}

// changed tells onChange of session id. Called with no lock held.
func (c *Catalog) changed(id string) {
	if c.onChange != nil {
		c.onChange(id)
	}
}

// Open opens the catalog of home, creating <home>/sessions (mode 0700) when
// it is missing. It reads every session header once, in parallel, and
// removes what interrupted writes left behind (temp files, half-created and
// half-removed folders). A folder with an unreadable header is kept as a
// damaged entry; a settings.json that cannot be read is moved aside to
// settings.json.damaged-<time> and the settings start empty. Entries of
// the sessions directory that are not folders named by a valid id are
// ignored, unless their header names a session: then that session is
// held by two folders, and selecting it fails with a *DuplicateError.
func Open(home string, opts ...Option) (*Catalog, error) {
	if home == "" {
		return nil, errors.New("open catalog: empty home path")
	}
	c := &Catalog{
		home:    home,
		dir:     filepath.Join(home, sessionsDir),
		now:     func() time.Time { return time.Now().UTC().Round(0) },
		newID:   newID,
		log:     slog.New(slog.DiscardHandler),
		entries: make(map[string]*entry),
		copies:  make(map[string][]string),
	}
	for _, o := range opts {
		o(c)
	}
	c.idle.L = &c.mu
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	if err := c.loadSettings(); err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	if err := c.loadSessions(); err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	return c, nil
}

func (c *Catalog) loadSessions() error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	var names []string
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, creatingPrefix) || strings.HasPrefix(name, removingPrefix) {
			// Interrupted before its rename (a create) or after it (a
			// remove): in both cases not a session.
			if err := os.RemoveAll(filepath.Join(c.dir, name)); err != nil {
				return fmt.Errorf("remove leftover %s: %w", name, err)
			}
			continue
		}
		if !de.IsDir() {
			continue
		}
		if validID(name) != nil {
			// Not a session's folder, but perhaps a copy of one.
			if id, ok := headerID(filepath.Join(c.dir, name)); ok {
				c.copies[id] = append(c.copies[id], name)
			}
			continue
		}
		names = append(names, name)
	}
	headers := make([]Header, len(names))
	claims := make([]string, len(names)) // the id a folder's header names, when not its own
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(loadWorkers, len(names)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				headers[i], claims[i] = c.loadHeader(filepath.Join(c.dir, names[i]), names[i])
			}
		})
	}
	wg.Wait()
	for i, h := range headers {
		c.entries[h.ID] = &entry{h: &h}
		if claims[i] != "" {
			c.copies[claims[i]] = append(c.copies[claims[i]], names[i])
		}
	}
	return nil
}

// headerID returns the session id the header in folder dir names, if it
// has a header that can be read. It changes nothing on disk.
func headerID(dir string) (string, bool) {
	b, err := readFileLimited(filepath.Join(dir, headerName), maxHeaderBytes)
	if err != nil {
		return "", false
	}
	h, err := decodeHeader(b)
	if err != nil {
		return "", false
	}
	return h.ID, true
}

// loadHeader reads the header of the session folder dir, named id. It
// never fails: a header that cannot be read gives a damaged Header. A
// header naming another session gives a damaged Header too, and that
// session's id as claims.
func (c *Catalog) loadHeader(dir, id string) (h Header, claims string) {
	// A temp file is what remains of a write interrupted before its
	// rename; header.json is the complete header from before it. One left
	// in place does no harm but take room, so a failure to remove it is
	// logged and the header read all the same.
	if err := removeLeftovers(dir, headerName, legacyHeaderTemp); err != nil {
		c.log.Warn("cannot remove what an interrupted header write left", "session", id, "err", err)
	}
	damaged := func(format string, args ...any) (Header, string) {
		return Header{ID: id, Damaged: true, Damage: fmt.Sprintf(format, args...)}, ""
	}
	b, err := readFileLimited(filepath.Join(dir, headerName), maxHeaderBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return damaged("%s is missing", headerName)
	case err != nil:
		return damaged("read %s: %v", headerName, err)
	}
	h, err = decodeHeader(b)
	if err != nil {
		return damaged("%v", err)
	}
	if h.ID != id {
		d, _ := damaged("header names session %q but its folder is %q", h.ID, id)
		return d, h.ID
	}
	return h, ""
}

// Dir returns the folder of session id. It does not check that the session
// exists.
func (c *Catalog) Dir(id string) string { return filepath.Join(c.dir, id) }

// TranscriptPath returns the path of session id's transcript. The catalog
// never opens it.
func (c *Catalog) TranscriptPath(id string) string {
	return filepath.Join(c.dir, id, transcriptName)
}

// ListOptions selects what List returns.
type ListOptions struct {
	// IncludeArchived lists archived sessions too.
	IncludeArchived bool
	// After, when set, starts the list after that place in its order,
	// wherever sessions moved since.
	After *ListPlace
	// Limit bounds how many headers List returns; 0 returns them all.
	Limit int
}

// ListPlace is a place in List's order: a session's last activity, in
// Unix nanoseconds, and its id.
type ListPlace struct {
	At int64
	ID string
}

// List returns the sessions, damaged ones included, most recently active
// first (ties by id). It reads nothing from disk, and copies only the
// headers it returns.
func (c *Catalog) List(opts ListOptions) []Header {
	c.mu.Lock()
	hs := make([]*Header, 0, len(c.entries))
	for _, e := range c.entries {
		if e.creating || (e.h.Archived && !opts.IncludeArchived) {
			continue
		}
		hs = append(hs, e.h)
	}
	c.mu.Unlock()
	sortHeaders(hs)
	if a := opts.After; a != nil {
		hs = hs[sort.Search(len(hs), func(i int) bool {
			t := hs[i].LastActivityAt.UnixNano()
			return t < a.At || t == a.At && hs[i].ID > a.ID
		}):]
	}
	if opts.Limit > 0 && len(hs) > opts.Limit {
		hs = hs[:opts.Limit]
	}
	return copies(hs)
}

// sorted sorts hs into List order and returns copies of the headers.
func sorted(ps []*Header) []Header {
	sortHeaders(ps)
	return copies(ps)
}

// sortHeaders sorts ps into List order. It sorts pointers, not the
// headers themselves, which are large to move.
func sortHeaders(ps []*Header) {
	slices.SortFunc(ps, func(a, b *Header) int {
		if c := b.LastActivityAt.Compare(a.LastActivityAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// copies returns copies of the headers ps points to.
func copies(ps []*Header) []Header {
	out := make([]Header, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

// Get returns the header of session id (exactly that id). A damaged
// session's header has Damaged set. A missing session is a *NotFoundError.
func (c *Catalog) Get(id string) (Header, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil || e.creating {
		return Header{}, &NotFoundError{Selector: id}
	}
	return *e.h, nil
}

// Resolve returns the session selector names: the session whose id is
// selector, else the only session whose id starts with it. No match is a
// *NotFoundError (ErrNotFound); several are an *AmbiguousError
// (ErrAmbiguous) listing them; a session whose id another folder's header
// names too is a *DuplicateError (ErrAmbiguous as well) naming the
// folders; an empty selector, or one longer than MaxIDLen, is an
// *InvalidError. Archived and damaged sessions are selectable.
func (c *Catalog) Resolve(selector string) (Header, error) {
	switch {
	case selector == "":
		return Header{}, invalid("selector", "must not be empty")
	case len(selector) > MaxIDLen:
		// Named by its length, not echoed: an answer echoing it could be
		// too large to send.
		return Header{}, invalid("selector", "is %d characters long; a session id has at most %d", len(selector), MaxIDLen)
	}
	c.mu.Lock()
	if e := c.entries[selector]; e != nil && !e.creating {
		h, err := c.selectedLocked(*e.h) // e.h is replaced under mu when the header changes
		c.mu.Unlock()
		return h, err
	}
	var matches []*Header
	for id, e := range c.entries {
		if !e.creating && strings.HasPrefix(id, selector) {
			matches = append(matches, e.h)
		}
	}
	var one Header
	var err error
	if len(matches) == 1 {
		one, err = c.selectedLocked(*matches[0])
	}
	c.mu.Unlock()
	switch len(matches) {
	case 0:
		return Header{}, &NotFoundError{Selector: selector}
	case 1:
		return one, err
	}
	return Header{}, &AmbiguousError{Selector: selector, Candidates: sorted(matches)}
}

// selectedLocked returns h, the one session a selector matched, unless
// other folders hold copies of it.
func (c *Catalog) selectedLocked(h Header) (Header, error) {
	if copies := c.copies[h.ID]; len(copies) > 0 {
		folders := append([]string{h.ID}, copies...)
		slices.Sort(folders)
		return Header{}, &DuplicateError{ID: h.ID, Folders: folders}
	}
	return h, nil
}
