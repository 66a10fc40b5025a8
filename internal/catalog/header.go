package catalog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/protocol"
)

// SchemaVersion is the version of the header format this package writes. A
// header of a newer version is treated as damaged rather than rewritten
// without the fields this version does not know.
const SchemaVersion = 1

// Thinking levels.
const (
	ThinkingOff    = "off"
	ThinkingLow    = "low"
	ThinkingMedium = "medium"
	ThinkingHigh   = "high"
)

// Approval policies: which tool calls wait for a person.
const (
	// ApprovalAsk asks before every tool call that changes something.
	ApprovalAsk = "ask"
	// ApprovalAll approves every tool call.
	ApprovalAll = "all"
	// ApprovalReadOnly allows only tool calls that change nothing.
	ApprovalReadOnly = "read-only"
)

// Defaults of a new session.
const (
	DefaultThinking = ThinkingOff
	DefaultApproval = ApprovalAsk
	DefaultSandbox  = protocol.SandboxWorkspace
	DefaultNetwork  = protocol.NetworkOn
)

// MaxTitleLen is the most characters a title may have.
const MaxTitleLen = 200

// MaxModelLen is the most bytes a model string may have.
const MaxModelLen = 256

// Header is a session's metadata, as stored in its folder's header.json.
type Header struct {
	SchemaVersion int    `json:"schemaVersion"`
	ID            string `json:"id"`
	// Title is what the session is called: given at its creation or by
	// Rename, else taken from its first prompt (TitleFromPrompt); empty
	// until then.
	Title string `json:"title"`
	// Cwd is the absolute path of the directory the session works in.
	Cwd string `json:"cwd"`
	// Model is "provider/model", or empty when the session was created
	// with no model known; the host then uses its default.
	Model    string `json:"model,omitempty"`
	Thinking string `json:"thinking"`
	Approval string `json:"approval"`
	// Sandbox is what the session's commands may touch:
	// protocol.SandboxReadOnly, SandboxWorkspace or SandboxFull. A header
	// written before sandboxes has none: DefaultSandbox.
	Sandbox string `json:"sandbox,omitempty"`
	// Network is protocol.NetworkOn or NetworkOff; none: DefaultNetwork.
	Network string `json:"network,omitempty"`
	// Plugins are the directories of the session's plugin packages,
	// which each of its workers loads; a header written before plugin
	// packages has none.
	Plugins []string `json:"plugins,omitempty"`

	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the header last changed.
	UpdatedAt time.Time `json:"updatedAt"`
	// LastActivityAt is when the session last did something (Touch);
	// listings are ordered by it.
	LastActivityAt time.Time `json:"lastActivityAt"`

	Archived bool `json:"archived"`
	// MetadataRevision counts the header's changes; 1 after Create.
	MetadataRevision uint64 `json:"metadataRevision"`

	// Damaged reports a folder whose header could not be read. Only ID
	// (the folder's name) and Damage are set then.
	Damaged bool `json:"-"`
	// Damage says why the header could not be read.
	Damage string `json:"-"`
}

// Session returns h in the protocol's shape. status is the session's
// runtime status, which only the host knows.
func (h Header) Session(status string) protocol.Session {
	return protocol.Session{
		SessionID:        h.ID,
		Title:            h.Title,
		Cwd:              h.Cwd,
		Model:            h.Model,
		Thinking:         h.Thinking,
		Approval:         h.Approval,
		Sandbox:          h.Sandbox,
		Network:          h.Network,
		Plugins:          slices.Clone(h.Plugins),
		CreatedAt:        h.CreatedAt,
		LastActivityAt:   h.LastActivityAt,
		Status:           status,
		Archived:         h.Archived,
		Damaged:          h.Damaged,
		MetadataRevision: h.MetadataRevision,
	}
}

// encodeHeader returns the bytes of header.json for h.
func encodeHeader(h Header) ([]byte, error) {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	return append(b, '\n'), nil
}

// decodeHeader parses the contents of a header.json. Headers on disk are
// input from outside: anything that is not a header this package could have
// written is an error.
func decodeHeader(b []byte) (Header, error) {
	if len(b) > maxHeaderBytes {
		return Header{}, fmt.Errorf("header is larger than %d bytes", maxHeaderBytes)
	}
	var h Header
	if err := json.Unmarshal(b, &h); err != nil {
		return Header{}, fmt.Errorf("header is not valid JSON: %w", err)
	}
	h.Sandbox = cmp.Or(h.Sandbox, DefaultSandbox)
	h.Network = cmp.Or(h.Network, DefaultNetwork)
	if err := h.check(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// check reports whether h holds what Create and the changes guarantee.
func (h *Header) check() error {
	switch {
	case h.SchemaVersion < 1:
		return errors.New("header has no schemaVersion")
	case h.SchemaVersion > SchemaVersion:
		return fmt.Errorf("header schemaVersion %d is newer than this agentd reads (%d)", h.SchemaVersion, SchemaVersion)
	}
	if err := validID(h.ID); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if h.Cwd == "" || !filepath.IsAbs(h.Cwd) {
		return fmt.Errorf("header: cwd %q is not an absolute path", h.Cwd)
	}
	if strings.TrimSpace(h.Title) != h.Title {
		return errors.New("header: title has surrounding space")
	}
	if _, err := cleanTitle(h.Title); err != nil && h.Title != "" {
		return fmt.Errorf("header: %w", err)
	}
	if h.Model != "" {
		if err := ValidModel(h.Model); err != nil {
			return fmt.Errorf("header: %w", err)
		}
	}
	if err := validThinking(h.Thinking); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if err := validApproval(h.Approval); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if err := validSandbox(h.Sandbox, h.Network); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if err := validPlugins(h.Plugins); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"createdAt", h.CreatedAt}, {"updatedAt", h.UpdatedAt}, {"lastActivityAt", h.LastActivityAt}} {
		if t.t.IsZero() {
			return fmt.Errorf("header: %s is missing", t.name)
		}
		// Keep every time one that encodes again.
		if y := t.t.UTC().Year(); y < 1 || y > 9999 {
			return fmt.Errorf("header: %s is out of range", t.name)
		}
	}
	if h.MetadataRevision == 0 {
		return errors.New("header: metadataRevision is missing")
	}
	return nil
}

// cleanTitle trims title and checks what remains.
func cleanTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	switch {
	case title == "":
		return "", invalid("title", "must not be empty")
	case !utf8.ValidString(title):
		return "", invalid("title", "must be UTF-8")
	case utf8.RuneCountInString(title) > MaxTitleLen:
		return "", invalid("title", "must be at most %d characters, not %d", MaxTitleLen, utf8.RuneCountInString(title))
	case strings.ContainsFunc(title, unicode.IsControl):
		return "", invalid("title", "must not contain control characters")
	}
	return title, nil
}

// Label names h for a person beside its id: its title and the directory
// it works in, "fix the build, in proj", or "untitled, in proj".
func (h Header) Label() string {
	return Label(h.Title, h.Cwd)
}

// Label names a session of title working in cwd for a person, as
// Header.Label does.
func Label(title, cwd string) string {
	return cmp.Or(title, "untitled") + ", in " + filepath.Base(cwd)
}

// PromptTitleLen is the most characters a title taken from a prompt has.
const PromptTitleLen = 60

// TitleFromPrompt returns a short title of one line for a session whose
// first prompt is prompt: its first line that says something, with its
// spaces collapsed and control characters dropped, cut at a word to at
// most PromptTitleLen characters with "…" when longer. It is empty when
// the prompt says nothing.
func TitleFromPrompt(prompt string) string {
	var line string
	for l := range strings.Lines(prompt) {
		if line = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == utf8.RuneError {
				return ' '
			}
			return r
		}, l)), " "); line != "" {
			break
		}
	}
	runes := []rune(line)
	if len(runes) <= PromptTitleLen {
		return line
	}
	cut := string(runes[:PromptTitleLen-1])
	if i := strings.LastIndexByte(cut, ' '); i >= len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}

// ValidModel reports whether model is written "provider/model" with both
// parts present. The error is an *InvalidError for field "model" that is
// ErrInvalidModel.
func ValidModel(model string) error {
	bad := func(format string, args ...any) error {
		e := invalid("model", format, args...)
		e.kind = ErrInvalidModel
		return e
	}
	provider, name, ok := strings.Cut(model, "/")
	switch {
	case model == "":
		return bad("must not be empty; write provider/model")
	case !utf8.ValidString(model):
		return bad("must be UTF-8")
	case strings.ContainsFunc(model, unicode.IsSpace), strings.ContainsFunc(model, unicode.IsControl):
		return bad("%q must not contain spaces or control characters", model)
	case len(model) > MaxModelLen:
		return bad("must be at most %d bytes", MaxModelLen)
	case provider == "":
		return bad("%q has no provider; write provider/model", model)
	case !ok || name == "":
		return bad("%q: provider requires a model; write %s/<model>", model, provider)
	}
	return nil
}

func validThinking(level string) error {
	switch level {
	case ThinkingOff, ThinkingLow, ThinkingMedium, ThinkingHigh:
		return nil
	}
	return invalid("thinking", "%q is not a level; use off, low, medium or high", level)
}

func validApproval(policy string) error {
	switch policy {
	case ApprovalAsk, ApprovalAll, ApprovalReadOnly:
		return nil
	}
	return invalid("approval", "%q is not a policy; use ask, all or read-only", policy)
}

// validPlugins checks the directories of a session's plugin packages.
func validPlugins(dirs []string) error {
	if err := protocol.ValidPluginDirs("plugins", dirs); err != nil {
		var de *protocol.DecodeError
		if errors.As(err, &de) {
			return invalid(de.Field, "%s", de.Reason)
		}
		return invalid("plugins", "%v", err)
	}
	return nil
}

// validSandbox checks a sandbox mode and network setting, neither empty.
func validSandbox(mode, network string) error {
	switch mode {
	case protocol.SandboxReadOnly, protocol.SandboxWorkspace, protocol.SandboxFull:
	default:
		return invalid("sandbox", "%q is not a mode; use read-only, workspace or full", mode)
	}
	switch network {
	case protocol.NetworkOn:
	case protocol.NetworkOff:
		if mode == protocol.SandboxFull {
			return invalid("network", "off needs a sandbox, and mode full has none")
		}
	default:
		return invalid("network", "%q is not a setting; use on or off", network)
	}
	return nil
}
