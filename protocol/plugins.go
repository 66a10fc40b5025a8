package protocol

import (
	"path/filepath"
	"slices"
	"strings"
)

// Plugin package bounds.
const (
	// MaxPluginPackages bounds how many plugin packages a session has.
	MaxPluginPackages = 32
	// MaxPluginDirLen bounds a plugin package's directory, in bytes.
	MaxPluginDirLen = 4096
)

// ValidPluginDirs checks the plugin package directories of a session,
// naming the one at fault as field[i]: each an absolute, clean path of
// at most MaxPluginDirLen bytes, none twice, at most MaxPluginPackages.
func ValidPluginDirs(field string, dirs []string) error {
	if len(dirs) > MaxPluginPackages {
		return FieldError(field, "at most %d packages, not %d", MaxPluginPackages, len(dirs))
	}
	for i, d := range dirs {
		at := field + "[" + itoa(i) + "]"
		switch {
		case d == "":
			return FieldError(at, "is empty")
		case len(d) > MaxPluginDirLen:
			return FieldError(at, "is longer than %d bytes", MaxPluginDirLen)
		case strings.ContainsRune(d, 0):
			return FieldError(at, "holds a NUL byte")
		case !filepath.IsAbs(d):
			return FieldError(at, "%q is not an absolute path", d)
		case filepath.Clean(d) != d:
			return FieldError(at, "%q is not a clean path (%q)", d, filepath.Clean(d))
		case slices.Index(dirs, d) < i:
			return FieldError(at, "%q is given twice", d)
		}
	}
	return nil
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// SessionPluginsSetInput is the input of session.plugins.set.
type SessionPluginsSetInput struct {
	SessionID string `json:"sessionId"`
	// Plugins are the directories of the session's plugin packages, in
	// Claude Code's layout, absolute; empty: none.
	Plugins []string `json:"plugins"`
}

// Validate checks the input.
func (in *SessionPluginsSetInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	return ValidPluginDirs("input.plugins", in.Plugins)
}

// SessionCommandsResult is the result of session.commands: the plugin
// packages the session's worker loaded, and their prompt commands.
type SessionCommandsResult struct {
	Packages []PluginPackage `json:"packages"`
	Commands []PromptCommand `json:"commands"`
	// Skills are the names the model loads the packages' skills by.
	Skills []PluginSkill `json:"skills"`
}

// PluginPackage is a plugin package as the session's worker loaded it.
type PluginPackage struct {
	// Dir is the package's directory, as the session records it.
	Dir         string `json:"dir"`
	Name        string `json:"name,omitempty"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Activations counts the times this worker loaded the package: 1 for
	// a worker that loaded it once at its start.
	Activations int `json:"activations"`
	// Error says why the package could not be loaded (its directory gone
	// since it was recorded, say); its commands and skills are then none.
	Error string `json:"error,omitempty"`
}

// PromptCommand is a command of a plugin package: typed as /Name, it
// becomes its prompt (session.command.expand).
type PromptCommand struct {
	// Name is what the command is typed as, without the slash: the
	// command's own name, or package:name when two packages have one.
	Name         string `json:"name"`
	Package      string `json:"package"`
	Description  string `json:"description,omitempty"`
	ArgumentHint string `json:"argumentHint,omitempty"`
}

// PluginSkill is a skill of a plugin package, offered to the model.
type PluginSkill struct {
	// Name is what the model loads it by.
	Name        string `json:"name"`
	Package     string `json:"package"`
	Description string `json:"description"`
}

// MaxCommandArgumentsBytes bounds the arguments typed after a command.
const MaxCommandArgumentsBytes = 64 << 10

// CommandExpandInput is the input of session.command.expand.
type CommandExpandInput struct {
	SessionID string `json:"sessionId"`
	// Name is the command as typed, without its slash.
	Name string `json:"name"`
	// Arguments are what was typed after the name.
	Arguments string `json:"arguments,omitempty"`
}

// Validate checks the input.
func (in *CommandExpandInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if err := requireString("input.name", in.Name); err != nil {
		return err
	}
	if strings.HasPrefix(in.Name, "/") {
		return FieldError("input.name", "is the command's name without its slash, not %q", in.Name)
	}
	if len(in.Arguments) > MaxCommandArgumentsBytes {
		return FieldError("input.arguments", "is longer than %d bytes", MaxCommandArgumentsBytes)
	}
	return nil
}

// CommandExpansion is the result of session.command.expand: the prompt a
// command becomes, to start a turn with.
type CommandExpansion struct {
	Name    string `json:"name"`
	Package string `json:"package"`
	Prompt  string `json:"prompt"`
}

func (in *SessionPluginsSetInput) SessionRef() *string { return &in.SessionID }
func (in *CommandExpandInput) SessionRef() *string     { return &in.SessionID }
