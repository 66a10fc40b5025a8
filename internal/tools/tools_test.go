package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
)

func TestBuiltinToolsAreNamedInOrderAndMarkedReadOnlyOrNot(t *testing.T) {
	want := []struct {
		name     string
		readOnly bool
	}{
		{"bash", false}, {"bash_output", true}, {"bash_stop", false}, {"read", true}, {"write", false}, {"edit", false},
		{"ls", true}, {"find", true}, {"grep", true}, {"todo", true},
	}
	got := Builtin()
	if len(got) != len(want) {
		t.Fatalf("Builtin has %d tools, want %d", len(got), len(want))
	}
	for i, w := range want {
		if name := got[i].Spec().Name; name != w.name {
			t.Errorf("tool %d is %q, want %q", i, name, w.name)
		}
		if ro := got[i].ReadOnly(); ro != w.readOnly {
			t.Errorf("%s: ReadOnly() = %v, want %v", w.name, ro, w.readOnly)
		}
	}
}

func TestEverySpecIsAClosedObjectSchemaWithADescription(t *testing.T) {
	for _, tool := range Builtin() {
		spec := tool.Spec()
		t.Run(spec.Name, func(t *testing.T) {
			if len(spec.Description) < 80 || strings.Contains(spec.Description, "\n") {
				t.Errorf("description should be one paragraph: %q", spec.Description)
			}
			var s struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			}
			if err := json.Unmarshal(spec.Parameters, &s); err != nil {
				t.Fatalf("parameters are not JSON: %v", err)
			}
			if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties {
				t.Errorf("parameters must be an object without additional properties: %s", spec.Parameters)
			}
			for _, r := range s.Required {
				if _, ok := s.Properties[r]; !ok {
					t.Errorf("required %q is not a property", r)
				}
			}
			for name, p := range s.Properties {
				var prop struct {
					Description string `json:"description"`
				}
				if err := json.Unmarshal(p, &prop); err != nil || prop.Description == "" {
					t.Errorf("property %q has no description", name)
				}
			}
			// A caller changing its copy does not change the tool's.
			spec.Parameters[0] = 'X'
			if tool.Spec().Parameters[0] == 'X' {
				t.Error("Spec hands out the tool's own parameters")
			}
		})
	}
}

// Every tool refuses arguments of the wrong type, unknown arguments and
// missing required ones with an error result naming the argument.
func TestBadArgumentsAreErrorResultsNamingTheArgument(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"f.txt": "hello\n"})
	tools := map[string]Tool{}
	for _, tool := range Builtin() {
		tools[tool.Spec().Name] = tool
	}
	cases := []struct {
		tool  string
		args  string
		wants []string
	}{
		{"bash", `{}`, []string{`bash: argument "command" is required`}},
		{"bash", `{"command": 42}`, []string{`argument "command" must be a string, got number`}},
		{"bash", `{"command": "true", "timeout_seconds": "5"}`, []string{`argument "timeout_seconds" must be an integer, got string`}},
		{"bash", `{"command": "true", "timeout_seconds": 1.5}`, []string{`argument "timeout_seconds" must be an integer`}},
		{"bash", `{"command": "true", "timeout_seconds": 601}`, []string{`argument "timeout_seconds" must be at most 600, got 601`}},
		{"bash", `{"command": "true", "timeout_seconds": 0}`, []string{`must be at least 1`}},
		{"bash", `{"command": ""}`, []string{`argument "command" must not be empty`}},
		{"bash", `{"command": "true", "cwd": "/"}`, []string{`unknown argument "cwd"`, "command", "timeout_seconds"}},
		{"read", `{}`, []string{`read: argument "path" is required`}},
		{"read", `{"path": ["f.txt"]}`, []string{`argument "path" must be a string, got array`}},
		{"read", `{"path": "f.txt", "offset": 0}`, []string{`argument "offset" must be at least 1`}},
		{"read", `{"path": "f.txt", "limit": true}`, []string{`argument "limit" must be an integer, got boolean`}},
		{"read", `{"path": "f.txt", "lines": 3}`, []string{`unknown argument "lines"`}},
		{"write", `{"path": "g.txt"}`, []string{`write: argument "content" is required`}},
		{"write", `{"content": "x"}`, []string{`argument "path" is required`}},
		{"write", `{"path": "g.txt", "content": null}`, []string{`argument "content" is required`}},
		{"write", `{"path": "g.txt", "content": {"text": "x"}}`, []string{`argument "content" must be a string, got object`}},
		{"write", `{"path": "g.txt", "content": "x", "mode": 420}`, []string{`unknown argument "mode"`}},
		{"edit", `{"path": "f.txt", "new_string": "bye"}`, []string{`edit: argument "old_string" is required`}},
		{"edit", `{"path": "f.txt", "old_string": "hello", "new_string": "bye", "replace_all": "yes"}`, []string{`argument "replace_all" must be a boolean, got string`}},
		{"edit", `{"path": "f.txt", "old": "hello", "new_string": "bye"}`, []string{`unknown argument "old"`, `argument "old_string" is required`}},
		{"ls", `{"path": 7}`, []string{`ls: argument "path" must be a string, got number`}},
		{"ls", `{"dir": "."}`, []string{`unknown argument "dir" (known: path)`}},
		{"find", `{"path": "."}`, []string{`find: argument "pattern" is required`}},
		{"find", `{"pattern": "*.go", "path": false}`, []string{`argument "path" must be a string, got boolean`}},
		{"find", `{"pattern": "*.go", "type": "f"}`, []string{`unknown argument "type"`}},
		{"grep", `{"path": "."}`, []string{`grep: argument "pattern" is required`}},
		{"grep", `{"pattern": "x", "ignore_case": 1}`, []string{`argument "ignore_case" must be a boolean, got number`}},
		{"grep", `{"pattern": "x", "context": 2}`, []string{`unknown argument "context"`}},
		{"todo", `{}`, []string{`todo: argument "items" is required`}},
		{"todo", `{"items": "do it"}`, []string{`argument "items" must be an array, got string`}},
		{"todo", `{"items": ["do it"]}`, []string{`argument "items[0]" must be an object, got string`}},
		{"todo", `{"items": [{"text": "a", "status": "pending"}, {"text": "b"}]}`, []string{`argument "items[1].status" is required`}},
		{"todo", `{"items": [{"text": "a", "status": "finished"}]}`, []string{`argument "items[0].status" must be one of pending, in_progress, done, got "finished"`}},
		{"todo", `{"items": [{"text": "a", "status": "done", "id": 1}]}`, []string{`unknown argument "items[0].id" (known: status, text)`}},
		{"todo", `{"items": [{"text": 3, "status": "done"}]}`, []string{`argument "items[0].text" must be a string, got number`}},
	}
	for _, tool := range Builtin() {
		name := tool.Spec().Name
		cases = append(cases,
			struct {
				tool  string
				args  string
				wants []string
			}{name, `[1, 2]`, []string{name + ": arguments must be a JSON object, got array"}},
			struct {
				tool  string
				args  string
				wants []string
			}{name, `{"path": `, []string{name + ": arguments are not valid JSON"}},
		)
	}
	for _, c := range cases {
		t.Run(c.tool+" "+c.args, func(t *testing.T) {
			env := &Env{Cwd: dir, Todo: &Todo{}}
			r := run(t, tools[c.tool], env, c.args)
			mustFail(t, r, c.wants...)
			if got := readFile(t, dir+"/f.txt"); got != "hello\n" {
				t.Errorf("bad arguments changed a file: %q", got)
			}
			if items := env.Todo.Items(); len(items) != 0 {
				t.Errorf("bad arguments changed the plan: %v", items)
			}
		})
	}
}

func TestAbsentArgumentsCountAsAnEmptyObject(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": ""})
	for _, raw := range []string{``, `null`, `  `} {
		r := lsTool{}.Run(context.Background(), &Env{Cwd: dir}, json.RawMessage(raw))
		if got := mustOK(t, r); got != "a.txt\n" {
			t.Errorf("ls with arguments %q = %q", raw, got)
		}
	}
	mustFail(t, run(t, readTool{}, &Env{Cwd: dir}, ``), `read: argument "path" is required`)
}

func TestSetLooksUpToolsByNameAndKeepsTheirOrder(t *testing.T) {
	set, err := NewSet(Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	names := set.Names()
	if !slices.Equal(names, []string{"bash", "bash_output", "bash_stop", "read", "write", "edit", "ls", "find", "grep", "todo"}) {
		t.Errorf("Names() = %v", names)
	}
	specs := set.Specs()
	for i, s := range specs {
		if s.Name != names[i] {
			t.Errorf("Specs()[%d] is %q, want %q", i, s.Name, names[i])
		}
	}
	if tool, ok := set.Lookup("grep"); !ok || tool.Spec().Name != "grep" {
		t.Errorf("Lookup(grep) = %v, %v", tool, ok)
	}
	if _, ok := set.Lookup("rm"); ok {
		t.Error("Lookup(rm) found a tool")
	}
	if len(set.Tools()) != 10 {
		t.Errorf("Tools() has %d tools", len(set.Tools()))
	}
}

func TestSetRefusesTwoToolsOfOneName(t *testing.T) {
	if _, err := NewSet(readTool{}, lsTool{}, readTool{}); err == nil || !strings.Contains(err.Error(), `"read"`) {
		t.Errorf("NewSet with a duplicate = %v", err)
	}
}

type panickyTool struct{ lsTool }

func (panickyTool) Spec() llm.ToolSpec { return llm.ToolSpec{Name: "boom"} }
func (panickyTool) Run(context.Context, *Env, json.RawMessage) Result {
	panic("kaboom")
}

func TestCallTurnsAPanicIntoAnErrorResultAndLogsItsStack(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	r := Call(context.Background(), log, panickyTool{}, &Env{}, json.RawMessage(`{}`))
	mustFail(t, r, "boom: failed unexpectedly: kaboom")
	var rec struct {
		Msg, Tool, Panic, Stack string
	}
	if err := json.Unmarshal(logged.Bytes(), &rec); err != nil {
		t.Fatalf("log %q: %v", logged.String(), err)
	}
	if rec.Tool != "boom" || rec.Panic != "kaboom" || !strings.Contains(rec.Stack, "panickyTool.Run") {
		t.Errorf("logged %+v", rec)
	}

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"x.txt": "one\n"})
	r = Call(context.Background(), nil, readTool{}, &Env{Cwd: dir}, json.RawMessage(`{"path":"x.txt"}`))
	if got := mustOK(t, r); !strings.Contains(got, "one") {
		t.Errorf("read through Call = %q", got)
	}
}
