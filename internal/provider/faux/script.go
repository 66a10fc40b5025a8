package faux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Limits of a script, so that a hostile file cannot make the decoder or a
// reply run away.
const (
	// MaxRepeat bounds a repeat step's count.
	MaxRepeat = 10_000_000
	// MaxDelay bounds a delay step.
	MaxDelay = time.Hour
	// MinContextWindow and MaxContextWindow bound the window a script
	// states.
	MinContextWindow = 256
	MaxContextWindow = 10_000_000
)

// Step kinds, as Step.Kind reports them.
const (
	StepText     = "text"
	StepThinking = "thinking"
	StepDelay    = "delay"
	StepTool     = "tool"
	StepError    = "error"
)

// Script is a decoded script: the replies, in the order the model calls
// consume them.
type Script struct {
	Replies []Reply
	// ContextWindow is the window, in tokens, the script states for its
	// model; 0 when it states none.
	ContextWindow int
	// Scripted is false for a script with no "replies" list: it states its
	// model's window and leaves the replies to the default behaviour.
	Scripted bool
	// Summaries are played, in order, to the requests for a summary
	// (llm.SummarySystem), when the script has a "summaries" list; without
	// one the provider writes summaries of its own, and Replies go to the
	// other requests alone.
	Summaries []Reply
	// ScriptedSummaries reports whether the script has a "summaries" list.
	ScriptedSummaries bool
}

// Reply is one scripted model reply.
type Reply struct {
	Steps []Step
}

// Step is one step of a scripted reply.
type Step struct {
	// Kind is one of the Step* kinds.
	Kind string
	// Text is the delta of a text or thinking step.
	Text string
	// Repeat is how many times a text or thinking delta is emitted (1 or
	// more).
	Repeat int
	// Delay is the wait of a delay step.
	Delay time.Duration
	// Tool, Arguments and CallID describe a tool call step. CallID is
	// empty when the script leaves it to the provider.
	Tool      string
	Arguments json.RawMessage
	CallID    string
	// Status, Message and RetryAfter describe an error step.
	Status     int
	Message    string
	RetryAfter time.Duration
}

// The file's shapes. Each is decoded with unknown fields refused.
type scriptFile struct {
	Comment       string            `json:"comment"`
	ContextWindow *int              `json:"contextWindow"`
	Replies       []json.RawMessage `json:"replies"`
	Summaries     []json.RawMessage `json:"summaries"`
}

type replyFile struct {
	Comment string            `json:"comment"`
	Steps   []json.RawMessage `json:"steps"`
}

type stepFile struct {
	Comment   string          `json:"comment"`
	Text      *string         `json:"text"`
	Thinking  *string         `json:"thinking"`
	Repeat    *int            `json:"repeat"`
	Delay     *string         `json:"delay"`
	Tool      *string         `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	ID        *string         `json:"id"`
	Error     json.RawMessage `json:"error"`
}

type errorFile struct {
	Status     int    `json:"status"`
	Message    string `json:"message"`
	RetryAfter string `json:"retryAfter"`
}

// ParseScript decodes a script strictly: an unknown field, a step with no
// kind or two, a bad duration, a step after an error and trailing data are
// errors that say where they are ("reply 2, step 3: …"). See the package
// documentation for the format.
func ParseScript(data []byte) (*Script, error) {
	var f scriptFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	s := &Script{Scripted: f.Replies != nil}
	if f.ContextWindow != nil {
		if *f.ContextWindow < MinContextWindow || *f.ContextWindow > MaxContextWindow {
			return nil, fmt.Errorf(`script: "contextWindow" is %d; it must be from %d to %d tokens`, *f.ContextWindow, MinContextWindow, MaxContextWindow)
		}
		s.ContextWindow = *f.ContextWindow
	}
	if f.Replies == nil && f.ContextWindow == nil {
		return nil, errors.New(`script: no "replies" list (a script with none states a "contextWindow")`)
	}
	s.Replies = make([]Reply, 0, len(f.Replies))
	for i, raw := range f.Replies {
		r, err := parseReply(raw)
		if err != nil {
			return nil, fmt.Errorf("script: reply %d%w", i+1, err)
		}
		s.Replies = append(s.Replies, r)
	}
	s.ScriptedSummaries = f.Summaries != nil
	for i, raw := range f.Summaries {
		r, err := parseReply(raw)
		if err != nil {
			return nil, fmt.Errorf("script: summary %d%w", i+1, err)
		}
		s.Summaries = append(s.Summaries, r)
	}
	return s, nil
}

// parseReply's errors start with ", step N: " or ": " so that the caller
// can put the reply's number before them.
func parseReply(raw json.RawMessage) (Reply, error) {
	var f replyFile
	if err := decodeStrict(raw, &f); err != nil {
		return Reply{}, fmt.Errorf(": %w", err)
	}
	if f.Steps == nil {
		return Reply{}, errors.New(`: no "steps" list`)
	}
	r := Reply{Steps: make([]Step, 0, len(f.Steps))}
	for i, rawStep := range f.Steps {
		if i > 0 && r.Steps[i-1].Kind == StepError {
			return Reply{}, fmt.Errorf(", step %d: no step can follow an error, which ends the reply", i+1)
		}
		st, err := parseStep(rawStep)
		if err != nil {
			return Reply{}, fmt.Errorf(", step %d: %w", i+1, err)
		}
		r.Steps = append(r.Steps, st)
	}
	return r, nil
}

func parseStep(raw json.RawMessage) (Step, error) {
	var f stepFile
	if err := decodeStrict(raw, &f); err != nil {
		return Step{}, err
	}
	var kinds []string
	if f.Text != nil {
		kinds = append(kinds, `"text"`)
	}
	if f.Thinking != nil {
		kinds = append(kinds, `"thinking"`)
	}
	if f.Delay != nil {
		kinds = append(kinds, `"delay"`)
	}
	if f.Tool != nil {
		kinds = append(kinds, `"tool"`)
	}
	if f.Error != nil {
		kinds = append(kinds, `"error"`)
	}
	switch len(kinds) {
	case 0:
		return Step{}, errors.New(`a step needs one of "text", "thinking", "delay", "tool" or "error"`)
	case 1:
	default:
		return Step{}, fmt.Errorf("a step has one kind, this one has %s", strings.Join(kinds, " and "))
	}
	if f.Repeat != nil && f.Text == nil && f.Thinking == nil {
		return Step{}, errors.New(`"repeat" goes with "text" or "thinking" only`)
	}
	if (f.Arguments != nil || f.ID != nil) && f.Tool == nil {
		return Step{}, errors.New(`"arguments" and "id" go with "tool" only`)
	}
	switch {
	case f.Text != nil, f.Thinking != nil:
		st := Step{Kind: StepText, Repeat: 1}
		if f.Text != nil {
			st.Text = *f.Text
		} else {
			st.Kind, st.Text = StepThinking, *f.Thinking
		}
		if f.Repeat != nil {
			if *f.Repeat < 1 || *f.Repeat > MaxRepeat {
				return Step{}, fmt.Errorf(`"repeat" is %d; it must be from 1 to %d`, *f.Repeat, MaxRepeat)
			}
			st.Repeat = *f.Repeat
		}
		return st, nil
	case f.Delay != nil:
		d, err := parseDuration("delay", *f.Delay)
		if err != nil {
			return Step{}, err
		}
		return Step{Kind: StepDelay, Delay: d}, nil
	case f.Tool != nil:
		if strings.TrimSpace(*f.Tool) == "" {
			return Step{}, errors.New(`"tool" names the tool; it is empty`)
		}
		st := Step{Kind: StepTool, Tool: *f.Tool, Arguments: json.RawMessage("{}")}
		if f.Arguments != nil {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(f.Arguments, &obj); err != nil || obj == nil {
				return Step{}, errors.New(`"arguments" must be a JSON object`)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, f.Arguments); err != nil {
				return Step{}, fmt.Errorf(`"arguments": %w`, err)
			}
			st.Arguments = buf.Bytes()
		}
		if f.ID != nil {
			if *f.ID == "" {
				return Step{}, errors.New(`"id" is empty; leave it out to have one made`)
			}
			st.CallID = *f.ID
		}
		return st, nil
	default:
		var e errorFile
		if err := decodeStrict(f.Error, &e); err != nil {
			return Step{}, fmt.Errorf(`"error": %w`, err)
		}
		if e.Status != 0 && (e.Status < 100 || e.Status > 599) {
			return Step{}, fmt.Errorf(`"error": status %d is not an HTTP status`, e.Status)
		}
		if e.Status == 0 && e.Message == "" {
			return Step{}, errors.New(`"error" needs a "status", a "message", or both`)
		}
		st := Step{Kind: StepError, Status: e.Status, Message: e.Message}
		if e.RetryAfter != "" {
			d, err := parseDuration("retryAfter", e.RetryAfter)
			if err != nil {
				return Step{}, fmt.Errorf(`"error": %w`, err)
			}
			st.RetryAfter = d
		}
		if st.Message == "" {
			st.Message = strings.ToLower(http.StatusText(e.Status))
			if st.Message == "" {
				st.Message = "scripted failure"
			}
		}
		return st, nil
	}
}

func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf(`%q is %q, not a duration such as "250ms" or "2s"`, field, s)
	}
	if d < 0 || d > MaxDelay {
		return 0, fmt.Errorf(`%q is %v; it must be from 0 to %v`, field, d, MaxDelay)
	}
	return d, nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// null and trailing data.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return errors.New("empty")
	}
	if trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cleanJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// cleanJSONError drops encoding/json's "json: " prefix and names unknown
// fields plainly.
func cleanJSONError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return fmt.Errorf("unknown field %s", name)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%q must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return errors.New(msg)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "a string"
	case "int", "int64":
		return "a whole number"
	case "slice":
		return "a list"
	case "struct", "map":
		return "an object"
	}
	return goKind
}
