package catalog

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// CreateOptions describes a new session.
type CreateOptions struct {
	// ID is the session's id; empty allocates one (IDLen characters of
	// lowercase base32). A chosen id must satisfy ValidID and be unused.
	ID string
	// Cwd is the absolute path of an existing directory. Required. The
	// session keeps it with symbolic links resolved.
	Cwd string
	// Title is empty for a session its first prompt titles.
	Title string
	// Model ("provider/model") defaults to ModelForNew("").
	Model string
	// Thinking defaults to DefaultThinking.
	Thinking string
	// Approval defaults to DefaultApproval.
	Approval string
	// Sandbox defaults to DefaultSandbox, Network to DefaultNetwork.
	Sandbox, Network string
	// Plugins are the directories of the session's plugin packages.
	Plugins []string
}

// maxIDAttempts bounds how many allocated ids Create tries; with 50 random
// bits a second attempt is already astronomically unlikely.
const maxIDAttempts = 16

// Create adds a session and writes its folder, complete, before returning
// its header. A chosen id already in use (or being created by a concurrent
// Create) fails with ErrDuplicate.
func (c *Catalog) Create(opts CreateOptions) (Header, error) {
	h, err := c.newHeader(opts)
	if err != nil {
		return Header{}, fmt.Errorf("cannot create session: %w", err)
	}

	c.mu.Lock()
	if h.Model == "" {
		h.Model = c.modelForNewLocked("")
	}
	if opts.ID != "" {
		// A concurrent Create of the same id decides: wait for it.
		for c.entries[opts.ID] != nil && c.entries[opts.ID].creating {
			c.idle.Wait()
		}
		if c.entries[opts.ID] != nil || len(c.copies[opts.ID]) > 0 {
			c.mu.Unlock()
			return Header{}, fmt.Errorf("cannot create session %s: %w", opts.ID, ErrDuplicate)
		}
		h.ID = opts.ID
	} else {
		for i := 0; ; i++ {
			if i == maxIDAttempts {
				c.mu.Unlock()
				return Header{}, errors.New("cannot create session: could not allocate an unused id")
			}
			h.ID = c.newID()
			if _, ok := c.entries[h.ID]; !ok && len(c.copies[h.ID]) == 0 {
				break
			}
		}
	}
	e := &entry{h: &h, busy: true, creating: true}
	c.entries[h.ID] = e
	c.mu.Unlock()

	err = c.writeNewFolder(h)

	c.mu.Lock()
	e.busy = false
	e.creating = false
	if err != nil {
		delete(c.entries, h.ID)
	}
	c.idle.Broadcast()
	c.mu.Unlock()
	if err != nil {
		return Header{}, fmt.Errorf("cannot create session %s: %w", h.ID, err)
	}
	c.changed(h.ID)
	return h, nil
}

// newHeader checks opts and returns the header they describe, without an
// id. It looks at the disk (the cwd) but not at the catalog.
func (c *Catalog) newHeader(opts CreateOptions) (Header, error) {
	if opts.ID != "" {
		if err := validID(opts.ID); err != nil {
			return Header{}, err
		}
	}
	if opts.Cwd == "" {
		return Header{}, invalid("cwd", "is required")
	}
	if !filepath.IsAbs(opts.Cwd) {
		return Header{}, invalid("cwd", "%q is not an absolute path", opts.Cwd)
	}
	cwd := filepath.Clean(opts.Cwd)
	fi, err := os.Stat(cwd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Header{}, invalid("cwd", "%s does not exist", cwd)
	case err != nil:
		return Header{}, invalid("cwd", "%v", err)
	case !fi.IsDir():
		return Header{}, invalid("cwd", "%s is not a directory", cwd)
	}
	title := ""
	// A symbolic link is followed once, here: the session works in the
	// directory it named at creation, wherever the link points later.
	if cwd, err = filepath.EvalSymlinks(cwd); err != nil {
		return Header{}, invalid("cwd", "%v", err)
	}
	if opts.Title != "" {
		if title, err = cleanTitle(opts.Title); err != nil {
			return Header{}, err
		}
	}
	if opts.Model != "" {
		if err := ValidModel(opts.Model); err != nil {
			return Header{}, err
		}
	}
	thinking := DefaultThinking
	if opts.Thinking != "" {
		if err := validThinking(opts.Thinking); err != nil {
			return Header{}, err
		}
		thinking = opts.Thinking
	}
	approval := DefaultApproval
	if opts.Approval != "" {
		if err := validApproval(opts.Approval); err != nil {
			return Header{}, err
		}
		approval = opts.Approval
	}
	sandbox, network := cmp.Or(opts.Sandbox, DefaultSandbox), cmp.Or(opts.Network, DefaultNetwork)
	if err := validSandbox(sandbox, network); err != nil {
		return Header{}, err
	}
	if err := validPlugins(opts.Plugins); err != nil {
		return Header{}, err
	}
	now := c.now()
	return Header{
		SchemaVersion:    SchemaVersion,
		Title:            title,
		Cwd:              cwd,
		Model:            opts.Model,
		Thinking:         thinking,
		Approval:         approval,
		Sandbox:          sandbox,
		Network:          network,
		Plugins:          slices.Clone(opts.Plugins),
		CreatedAt:        now,
		UpdatedAt:        now,
		LastActivityAt:   now,
		MetadataRevision: 1,
	}, nil
}

// writeNewFolder builds session h's folder under a temporary name and
// renames it into place, so that a crash leaves either no session or a
// complete one.
func (c *Catalog) writeNewFolder(h Header) error {
	b, err := encodeHeader(h)
	if err != nil {
		return err
	}
	staging, err := os.MkdirTemp(c.dir, creatingPrefix+h.ID+"-")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		os.RemoveAll(staging)
		return err
	}
	if err := os.Chmod(staging, 0o700); err != nil {
		return fail(err)
	}
	if err := atomicfile.WriteDurable(filepath.Join(staging, headerName), b, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(staging, c.Dir(h.ID)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// A folder appeared that the catalog did not make.
			err = fmt.Errorf("%w: a folder %s exists", ErrDuplicate, c.Dir(h.ID))
		}
		return fail(err)
	}
	return atomicfile.SyncDir(c.dir)
}

// change is what a change does to a header: it edits h and reports whether
// it changed anything. A change of nothing is neither written nor counted.
type change func(h *Header) (bool, error)

// update applies ch to session id's header and persists the result before
// returning it. op names the change in errors. Archived sessions refuse
// every change unless archivedOK.
func (c *Catalog) update(op, id string, archivedOK bool, ch change) (Header, error) {
	c.mu.Lock()
	e, err := c.acquireLocked(id)
	if err != nil {
		c.mu.Unlock()
		return Header{}, err
	}
	next := *e.h
	changed, err := c.checkChangeLocked(op, e, archivedOK, ch, &next)
	if err != nil || !changed {
		c.releaseLocked(e)
		c.mu.Unlock()
		if err != nil {
			return Header{}, err
		}
		return next, nil
	}
	next.MetadataRevision++
	if now := c.now(); now.After(next.UpdatedAt) {
		next.UpdatedAt = now
	}
	c.mu.Unlock()

	err = c.writeHeader(next)

	c.mu.Lock()
	c.releaseLocked(e)
	if err == nil {
		e.h = &next
	}
	c.mu.Unlock()
	if err != nil {
		return Header{}, fmt.Errorf("%s %s: %w", op, id, err)
	}
	c.changed(id)
	return next, nil
}

func (c *Catalog) checkChangeLocked(op string, e *entry, archivedOK bool, ch change, next *Header) (bool, error) {
	switch {
	case e.h.Damaged:
		return false, fmt.Errorf("%s %s: %w: %s", op, e.h.ID, ErrDamaged, e.h.Damage)
	case e.h.Archived && !archivedOK:
		return false, fmt.Errorf("%s %s: %w", op, e.h.ID, ErrArchived)
	}
	changed, err := ch(next)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", op, e.h.ID, err)
	}
	return changed, nil
}

// acquireLocked waits until session id is not busy, then marks it busy.
func (c *Catalog) acquireLocked(id string) (*entry, error) {
	for {
		e := c.entries[id]
		if e == nil || e.creating {
			return nil, &NotFoundError{Selector: id}
		}
		if !e.busy {
			e.busy = true
			return e, nil
		}
		c.idle.Wait()
	}
}

func (c *Catalog) releaseLocked(e *entry) {
	e.busy = false
	c.idle.Broadcast()
}

func (c *Catalog) writeHeader(h Header) error {
	b, err := encodeHeader(h)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteDurable(filepath.Join(c.Dir(h.ID), headerName), b, 0o600); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	return nil
}

// Rename sets session id's title. The title is trimmed and must be 1 to
// MaxTitleLen characters without control characters.
func (c *Catalog) Rename(id, title string) (Header, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return Header{}, fmt.Errorf("cannot rename session %s: %w", id, err)
	}
	return c.update("cannot rename session", id, false, func(h *Header) (bool, error) {
		if h.Title == title {
			return false, nil
		}
		h.Title = title
		return true, nil
	})
}

// TitleFromPrompt titles session id from prompt (TitleFromPrompt) when it
// has no title yet, and reports whether it did; a session with a title,
// or a prompt that says nothing, is left as it is.
func (c *Catalog) TitleFromPrompt(id, prompt string) (Header, bool, error) {
	title := TitleFromPrompt(prompt)
	titled := false
	h, err := c.update("cannot title session", id, false, func(h *Header) (bool, error) {
		if h.Title != "" || title == "" {
			return false, nil
		}
		h.Title, titled = title, true
		return true, nil
	})
	return h, titled, err
}

// Archive archives session id. An archived session is listed only on
// request and refuses changes other than Unarchive and Remove; archiving
// one again fails with ErrArchived.
func (c *Catalog) Archive(id string) (Header, error) {
	return c.update("cannot archive session", id, false, func(h *Header) (bool, error) {
		h.Archived = true
		return true, nil
	})
}

// Unarchive returns archived session id to the list. Unarchiving a session
// that is not archived changes nothing.
func (c *Catalog) Unarchive(id string) (Header, error) {
	return c.update("cannot unarchive session", id, true, func(h *Header) (bool, error) {
		if !h.Archived {
			return false, nil
		}
		h.Archived = false
		return true, nil
	})
}

// Touch records activity of session id at time at, which orders List. It
// is a change like the others (written at once, counted in
// MetadataRevision). A time not after the recorded one changes nothing, so
// activity never moves back.
func (c *Catalog) Touch(id string, at time.Time) (Header, error) {
	if at.IsZero() {
		return Header{}, fmt.Errorf("cannot touch session %s: %w", id, invalid("at", "must not be zero"))
	}
	if y := at.UTC().Year(); y < 1 || y > 9999 {
		return Header{}, fmt.Errorf("cannot touch session %s: %w", id, invalid("at", "is out of range"))
	}
	at = at.UTC().Round(0)
	return c.update("cannot touch session", id, false, func(h *Header) (bool, error) {
		if !at.After(h.LastActivityAt) {
			return false, nil
		}
		h.LastActivityAt = at
		return true, nil
	})
}

// SetModel sets session id's model ("provider/model"). It does not change
// the model of new sessions; see RecordSelectedModel.
func (c *Catalog) SetModel(id, model string) (Header, error) {
	if err := ValidModel(model); err != nil {
		return Header{}, fmt.Errorf("cannot set model of session %s: %w", id, err)
	}
	return c.update("cannot set model of session", id, false, func(h *Header) (bool, error) {
		if h.Model == model {
			return false, nil
		}
		h.Model = model
		return true, nil
	})
}

// SetPlugins sets the directories of session id's plugin packages; none
// leaves it none. An archived session's are not changed.
func (c *Catalog) SetPlugins(id string, dirs []string) (Header, error) {
	if err := validPlugins(dirs); err != nil {
		return Header{}, fmt.Errorf("cannot set plugins of session %s: %w", id, err)
	}
	return c.update("cannot set plugins of session", id, false, func(h *Header) (bool, error) {
		if slices.Equal(h.Plugins, dirs) {
			return false, nil
		}
		h.Plugins = slices.Clone(dirs)
		if len(h.Plugins) == 0 {
			h.Plugins = nil
		}
		return true, nil
	})
}

// SetThinking sets session id's thinking level: off, low, medium or high.
func (c *Catalog) SetThinking(id, level string) (Header, error) {
	if err := validThinking(level); err != nil {
		return Header{}, fmt.Errorf("cannot set thinking of session %s: %w", id, err)
	}
	return c.update("cannot set thinking of session", id, false, func(h *Header) (bool, error) {
		if h.Thinking == level {
			return false, nil
		}
		h.Thinking = level
		return true, nil
	})
}

// SetApproval sets session id's approval policy: ask, all or read-only.
func (c *Catalog) SetApproval(id, policy string) (Header, error) {
	if err := validApproval(policy); err != nil {
		return Header{}, fmt.Errorf("cannot set approval of session %s: %w", id, err)
	}
	return c.update("cannot set approval of session", id, false, func(h *Header) (bool, error) {
		if h.Approval == policy {
			return false, nil
		}
		h.Approval = policy
		return true, nil
	})
}

// Remove deletes session id and its folder, transcript included. Archived
// and damaged sessions can be removed. The folder is first renamed out of
// place, so a crash mid-way never leaves half a session; what remains of it
// is deleted by the next Open. Whoever writes the transcript must have
// stopped first.
func (c *Catalog) Remove(id string) error {
	c.mu.Lock()
	e, err := c.acquireLocked(id)
	c.mu.Unlock()
	if err != nil {
		return err
	}

	err = c.removeFolder(id)

	c.mu.Lock()
	c.releaseLocked(e)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("cannot remove session %s: %w", id, err)
	}
	c.removedLocked(id)
	c.mu.Unlock()
	c.changed(id)
	return nil
}

// removedLocked forgets removed session id. Called with mu held.
func (c *Catalog) removedLocked(id string) {
	delete(c.entries, id)
	// A removed copy no longer holds the id its header named.
	for claimed, folders := range c.copies {
		if i := slices.Index(folders, id); i >= 0 {
			if folders = slices.Delete(folders, i, i+1); len(folders) == 0 {
				delete(c.copies, claimed)
			} else {
				c.copies[claimed] = folders
			}
		}
	}
}

func (c *Catalog) removeFolder(id string) error {
	trash := filepath.Join(c.dir, removingPrefix+id+"-"+c.newID())
	err := os.Rename(c.Dir(id), trash)
	if errors.Is(err, fs.ErrNotExist) {
		// Someone else removed it; the session is gone all the same.
		return nil
	}
	if err != nil {
		return err
	}
	// The session is gone from its place. Should the rename not be synced
	// before a crash, the session is back after it, which loses nothing;
	// should the deletion fail, the next Open deletes what is left. Either
	// failure is logged, not returned: the session is removed.
	if err := atomicfile.SyncDir(c.dir); err != nil {
		c.log.Warn("removed session may come back after a crash", "session", id, "err", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		c.log.Warn("removed session's files are left until the catalog is next opened", "session", id, "path", trash, "err", err)
	}
	return nil
}

// Restore puts back the header of a session that a live worker runs when
// the catalog has none that can be read (its folder or its header.json
// was lost), from what the worker knows of it: what it leaves out (a
// title, a creation time) is set as a new session's would be. A session
// the catalog holds readable is left as it is, and returned.
func (c *Catalog) Restore(h Header) (Header, error) {
	h, err := c.restore(h)
	if err == nil {
		c.changed(h.ID)
	}
	return h, err
}

func (c *Catalog) restore(h Header) (Header, error) {
	if err := validID(h.ID); err != nil {
		return Header{}, err
	}
	if h.Cwd == "" || !filepath.IsAbs(h.Cwd) {
		return Header{}, invalid("cwd", "%q is not an absolute path", h.Cwd)
	}
	now := c.now()
	h.SchemaVersion, h.Damaged, h.Damage = SchemaVersion, false, ""
	h.UpdatedAt = now
	if h.CreatedAt.IsZero() {
		h.CreatedAt = now
	}
	if h.LastActivityAt.IsZero() {
		h.LastActivityAt = now
	}
	h.Thinking = cmp.Or(h.Thinking, DefaultThinking)
	h.Approval = cmp.Or(h.Approval, DefaultApproval)
	h.Sandbox = cmp.Or(h.Sandbox, DefaultSandbox)
	h.Network = cmp.Or(h.Network, DefaultNetwork)
	h.MetadataRevision = max(h.MetadataRevision, 1)
	c.mu.Lock()
	for c.entries[h.ID] != nil && c.entries[h.ID].creating {
		c.idle.Wait()
	}
	e := c.entries[h.ID]
	if e == nil {
		if len(c.copies[h.ID]) > 0 {
			c.mu.Unlock()
			return Header{}, &DuplicateError{ID: h.ID, Folders: c.copies[h.ID]}
		}
		e = &entry{h: &h, busy: true, creating: true}
		c.entries[h.ID] = e
		c.mu.Unlock()
		err := c.writeNewFolder(h)
		c.mu.Lock()
		defer c.mu.Unlock()
		defer c.idle.Broadcast()
		e.busy, e.creating = false, false
		if err != nil {
			delete(c.entries, h.ID)
			return Header{}, fmt.Errorf("restore session %s: %w", h.ID, err)
		}
		return h, nil
	}
	for e.busy {
		c.idle.Wait()
	}
	if !e.h.Damaged {
		defer c.mu.Unlock()
		return *e.h, nil
	}
	e.busy = true
	c.mu.Unlock()
	err := c.writeHeader(h)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(e)
	if err != nil {
		return Header{}, fmt.Errorf("restore session %s: %w", h.ID, err)
	}
	e.h = &h
	return h, nil
}
