package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// maxSettingsBytes bounds settings.json; a larger file is unreadable.
const maxSettingsBytes = 64 << 10

// Settings are the home's model settings, kept in <home>/settings.json.
type Settings struct {
	// DefaultModel is the model of new sessions when no client has
	// selected one.
	DefaultModel string `json:"defaultModel,omitempty"`
	// LastSelectedModel is the model a client selected last; it is the
	// model of new sessions.
	LastSelectedModel string `json:"lastSelectedModel,omitempty"`
}

func (s Settings) check() error {
	for _, m := range []string{s.DefaultModel, s.LastSelectedModel} {
		if m != "" {
			if err := ValidModel(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadSettings reads settings.json. A missing file is empty settings; an
// unreadable one is moved aside, keeping its bytes, and is empty settings.
func (c *Catalog) loadSettings() error {
	if err := removeLeftovers(c.home, settingsName, legacySettingsTemp); err != nil {
		return fmt.Errorf("remove what an interrupted write of %s left: %w", settingsName, err)
	}
	path := filepath.Join(c.home, settingsName)
	b, err := readFileLimited(path, maxSettingsBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		var s Settings
		if err = json.Unmarshal(b, &s); err == nil {
			if err = s.check(); err == nil {
				c.settings = s
				return nil
			}
		}
	}
	aside, rerr := atomicfile.MoveAside(path, c.now())
	if rerr != nil {
		return fmt.Errorf("%s is unreadable (%v) and could not be moved aside: %w", settingsName, err, rerr)
	}
	c.settingsMoved = aside
	return nil
}

// DamagedSettingsPath returns where Open moved an unreadable settings.json
// aside (its bytes kept, the settings started empty), or "" if it did not.
func (c *Catalog) DamagedSettingsPath() string { return c.settingsMoved }

// Settings returns the home's model settings.
func (c *Catalog) Settings() Settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings
}

// ModelForNew returns the model of a new session: the model a client
// selected last, else the home's default model, else hostDefault.
func (c *Catalog) ModelForNew(hostDefault string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modelForNewLocked(hostDefault)
}

func (c *Catalog) modelForNewLocked(hostDefault string) string {
	switch {
	case c.settings.LastSelectedModel != "":
		return c.settings.LastSelectedModel
	case c.settings.DefaultModel != "":
		return c.settings.DefaultModel
	}
	return hostDefault
}

// SetDefaultModel sets the home's default model ("provider/model"); ""
// clears it. Existing sessions keep their models.
func (c *Catalog) SetDefaultModel(model string) (Settings, error) {
	if model != "" {
		if err := ValidModel(model); err != nil {
			return Settings{}, fmt.Errorf("set default model: %w", err)
		}
	}
	return c.updateSettings("set default model", func(s *Settings) { s.DefaultModel = model })
}

// RecordSelectedModel records model ("provider/model") as the one a client
// selected last, which makes it the model of new sessions. Existing sessions
// keep their models.
func (c *Catalog) RecordSelectedModel(model string) (Settings, error) {
	if err := ValidModel(model); err != nil {
		return Settings{}, fmt.Errorf("record selected model: %w", err)
	}
	return c.updateSettings("record selected model", func(s *Settings) { s.LastSelectedModel = model })
}

// updateSettings applies edit to the settings and persists them before
// returning them. Writers take turns; readers never wait for the disk.
func (c *Catalog) updateSettings(op string, edit func(*Settings)) (Settings, error) {
	c.mu.Lock()
	for c.settingsBusy {
		c.idle.Wait()
	}
	next := c.settings
	edit(&next)
	if next == c.settings {
		c.mu.Unlock()
		return next, nil
	}
	c.settingsBusy = true
	c.mu.Unlock()

	err := c.writeSettings(next)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.settingsBusy = false
	c.idle.Broadcast()
	if err != nil {
		return Settings{}, fmt.Errorf("%s: %w", op, err)
	}
	c.settings = next
	return next, nil
}

func (c *Catalog) writeSettings(s Settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteDurable(filepath.Join(c.home, settingsName), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", settingsName, err)
	}
	return nil
}
