package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// schema is the subset of JSON Schema the tools' arguments use. The same
// value is sent to the model (marshalled) and checks what the model sends
// back (check), so the two cannot drift apart.
type schema struct {
	Type                 string             `json:"type"`
	Description          string             `json:"description,omitempty"`
	Properties           map[string]*schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
	Default              any                `json:"default,omitempty"`
}

// props is an object's properties.
type props map[string]*schema

// object returns the schema of an object that has exactly these properties,
// the named ones required.
func object(properties props, required ...string) *schema {
	for _, r := range required {
		if properties[r] == nil {
			panic("tools: required property " + r + " is not a property")
		}
	}
	no := false
	return &schema{Type: "object", Properties: properties, Required: required, AdditionalProperties: &no}
}

// str returns the schema of a string.
func str(description string) *schema { return &schema{Type: "string", Description: description} }

// nonEmpty returns the schema of a string of at least one character.
func nonEmpty(description string) *schema {
	one := 1
	return &schema{Type: "string", Description: description, MinLength: &one}
}

// integer returns the schema of an integer in [lo, hi]; hi 0 means no upper
// bound.
func integer(description string, lo, hi int64) *schema {
	s := &schema{Type: "integer", Description: description, Minimum: &lo}
	if hi != 0 {
		s.Maximum = &hi
	}
	return s
}

// boolean returns the schema of a boolean.
func boolean(description string) *schema { return &schema{Type: "boolean", Description: description} }

// withDefault documents the value an absent argument takes.
func (s *schema) withDefault(v any) *schema { s.Default = v; return s }

// decode checks the raw arguments against the tool's schema and fills dst
// (a pointer to a struct whose JSON fields mirror the schema). Absent
// arguments (empty or null) count as an empty object. When the arguments do
// not fit, it returns an error result naming every problem, and ok false.
func decode(tool string, s *schema, raw json.RawMessage, dst any) (bad Result, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if !json.Valid(raw) {
		return failf(tool, "arguments are not valid JSON"), false
	}
	if kind := jsonKind(raw); kind != "object" {
		return failf(tool, "arguments must be a JSON object, got %s", kind), false
	}
	var problems []string
	s.check("", raw, &problems)
	if len(problems) > 0 {
		return failf(tool, "%s", strings.Join(problems, "; ")), false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		// The schema and the struct disagree: a bug here, not the model's.
		return failf(tool, "arguments: %v", err), false
	}
	return Result{}, true
}

// check appends to problems every way raw (the value at path at) departs
// from s. raw is valid JSON.
func (s *schema) check(at string, raw json.RawMessage, problems *[]string) {
	kind := jsonKind(raw)
	want := s.Type
	if want == "integer" {
		if kind == "number" {
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				*problems = append(*problems, fmt.Sprintf("argument %q must be an integer, got %s", at, raw))
				return
			}
			if s.Minimum != nil && n < *s.Minimum {
				*problems = append(*problems, fmt.Sprintf("argument %q must be at least %d, got %d", at, *s.Minimum, n))
			}
			if s.Maximum != nil && n > *s.Maximum {
				*problems = append(*problems, fmt.Sprintf("argument %q must be at most %d, got %d", at, *s.Maximum, n))
			}
			return
		}
	} else if kind == want {
		switch want {
		case "string":
			s.checkString(at, raw, problems)
		case "array":
			s.checkArray(at, raw, problems)
		case "object":
			s.checkObject(at, raw, problems)
		}
		return
	}
	if at == "" {
		*problems = append(*problems, fmt.Sprintf("arguments must be %s, got %s", article(want), kind))
		return
	}
	*problems = append(*problems, fmt.Sprintf("argument %q must be %s, got %s", at, article(want), kind))
}

func (s *schema) checkString(at string, raw json.RawMessage, problems *[]string) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		*problems = append(*problems, fmt.Sprintf("argument %q: %v", at, err))
		return
	}
	if s.MinLength != nil && len(v) < *s.MinLength {
		*problems = append(*problems, fmt.Sprintf("argument %q must not be empty", at))
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		*problems = append(*problems, fmt.Sprintf("argument %q must be one of %s, got %q", at, strings.Join(s.Enum, ", "), v))
	}
}

func (s *schema) checkArray(at string, raw json.RawMessage, problems *[]string) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		*problems = append(*problems, fmt.Sprintf("argument %q: %v", at, err))
		return
	}
	if s.MaxItems != nil && len(items) > *s.MaxItems {
		*problems = append(*problems, fmt.Sprintf("argument %q must have at most %d items, got %d", at, *s.MaxItems, len(items)))
		return
	}
	for i, item := range items {
		s.Items.check(fmt.Sprintf("%s[%d]", at, i), item, problems)
	}
}

func (s *schema) checkObject(at string, raw json.RawMessage, problems *[]string) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		*problems = append(*problems, fmt.Sprintf("argument %q: %v", at, err))
		return
	}
	known := slices.Sorted(maps.Keys(s.Properties))
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if s.Properties[name] == nil {
			*problems = append(*problems, fmt.Sprintf("unknown argument %q (known: %s)", join(at, name), strings.Join(known, ", ")))
		}
	}
	for _, name := range s.Required {
		if v, ok := fields[name]; !ok || string(v) == "null" {
			*problems = append(*problems, fmt.Sprintf("argument %q is required", join(at, name)))
		}
	}
	for _, name := range known {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			continue // absent: required ones were reported above
		}
		s.Properties[name].check(join(at, name), v, problems)
	}
}

// join names a field of the value at path at.
func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// jsonKind names the JSON type of a valid value.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// article names a schema type for a message: "an integer", "a string".
func article(typ string) string {
	switch typ {
	case "integer", "object", "array":
		return "an " + typ
	}
	return "a " + typ
}
