// Package tools holds the agent's tools: what each does to the session's
// files and shell, the JSON arguments it takes, and the bounds it keeps.
//
// A tool is given a context, an Env (the session's working directory, its
// plan, and where to send partial output) and the raw JSON arguments the
// model wrote. It answers with a Result the model reads. Bad arguments, a
// missing file, a command that fails: all of these are Results with IsError
// set, never Go errors or panics, so the turn goes on and the model can try
// again.
//
// It knows nothing of models, sessions or the host: the agent loop decides
// when a tool runs, the approval policy decides whether it may, and the
// caller registers the tools it wants (Builtin returns the standard ones).
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/sandbox"
)

// Tool is one thing the agent can do.
type Tool interface {
	// Spec describes the tool to the model: its name, a one-paragraph
	// description, and the JSON Schema of its arguments.
	Spec() llm.ToolSpec
	// ReadOnly reports whether the tool leaves the user's files and shell
	// untouched; an approval policy of read-only runs these without asking.
	ReadOnly() bool
	// Run does the work. It never panics on bad arguments and reports every
	// failure through the Result.
	Run(ctx context.Context, env *Env, args json.RawMessage) Result
}

// Env is what a tool may touch of its session.
type Env struct {
	// Cwd is the session's working directory; relative paths resolve
	// against it. Empty means the process's working directory.
	Cwd string
	// Todo is the session's plan, changed by the todo tool.
	Todo *Todo
	// Environ is the environment commands run with (bash), as
	// os.Environ gives it; nil means the process's own. The worker leaves
	// the model providers' keys out of it.
	Environ []string
	// Sandbox walls in the commands bash runs itself (without
	// Background); nil runs them as they are.
	Sandbox *sandbox.Policy
	// Background, when set, runs the commands bash starts in the
	// background, as the session's runtime resources.
	Background Background
	// Progress, when set, receives partial output of a long-running tool
	// (bash) as it arrives. It is called from another goroutine than Run's,
	// one call at a time, and never after Run has returned.
	Progress func(chunk string)
	// Changed, when set, is told of each file the write and edit tools
	// changed, with what it held before (at most MaxBefore bytes of it),
	// once the change is made.
	Changed func(FileChange)
}

// MaxBefore bounds what a FileChange keeps of a file's content before:
// protocol.MaxKeptFile, which a file_change record states.
const MaxBefore = 4 << 20

// Result is a tool's answer.
type Result struct {
	// Content is what the model sees.
	Content string
	// IsError marks a call that did not do what was asked: bad arguments,
	// a missing file, a command that could not start or that was killed
	// for its timeout or a cancelled context. A command's non-zero exit
	// status is not one: it is reported in Content for the model to judge.
	IsError bool
}

// Builtin returns the standard tools, in the order they are offered to a
// model: bash, bash_output, bash_stop, read, write, edit, ls, find, grep,
// todo.
func Builtin() []Tool {
	return []Tool{
		bashTool{},
		bashOutputTool{},
		bashStopTool{},
		readTool{},
		writeTool{},
		editTool{},
		lsTool{},
		findTool{},
		grepTool{},
		todoTool{},
	}
}

// Set is a fixed collection of tools with distinct names, kept in the order
// they were given (the order a model is offered them).
type Set struct {
	// Both are constant after NewSet.
	tools  []Tool
	byName map[string]Tool
}

// NewSet returns a set of the given tools. It fails when a tool has no name
// or two tools share one.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{tools: slices.Clone(tools), byName: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		name := t.Spec().Name
		if name == "" {
			return nil, fmt.Errorf("tools: a tool of type %T has no name", t)
		}
		if _, dup := s.byName[name]; dup {
			return nil, fmt.Errorf("tools: two tools are named %q", name)
		}
		s.byName[name] = t
	}
	return s, nil
}

// Lookup returns the tool of that name.
func (s *Set) Lookup(name string) (Tool, bool) {
	t, ok := s.byName[name]
	return t, ok
}

// Tools returns the tools in order.
func (s *Set) Tools() []Tool { return slices.Clone(s.tools) }

// Names returns the tools' names in order.
func (s *Set) Names() []string {
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Spec().Name
	}
	return names
}

// Specs returns the tools' specifications in order, for a model request.
func (s *Set) Specs() []llm.ToolSpec {
	specs := make([]llm.ToolSpec, len(s.tools))
	for i, t := range s.tools {
		specs[i] = t.Spec()
	}
	return specs
}

// Call runs t with args, as the agent loop runs every tool. A tool that
// panics does not take its caller down: the panic becomes an error result
// naming the tool and the panic value, so the model can read what happened
// and the turn goes on, and log (nil discards) records the panic value and
// the stack at error level.
//
// Only a panic on the goroutine running t.Run is recovered; a tool must
// not panic on goroutines of its own.
func Call(ctx context.Context, log *slog.Logger, t Tool, env *Env, args json.RawMessage) (res Result) {
	name := t.Spec().Name
	defer func() {
		if p := recover(); p != nil {
			if log != nil {
				log.Error("tool panicked", "tool", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			res = failf(name, "failed unexpectedly: %v", p)
		}
	}()
	return t.Run(ctx, env, args)
}

// why says why ctx ended in words for the person and the model:
// "interrupted" for a turn's cancellation, not Go's "context canceled".
func why(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, context.Canceled):
		return "interrupted"
	case errors.Is(cause, context.DeadlineExceeded):
		return "out of time"
	case cause == nil:
		return "not ended"
	default:
		return cause.Error()
	}
}

// failf returns an error result whose message starts with the tool's name.
func failf(tool, format string, args ...any) Result {
	return Result{Content: tool + ": " + fmt.Sprintf(format, args...), IsError: true}
}

// makeSpec returns a tool's specification, built on first use from its
// arguments' schema and its description: only a worker ever asks for one,
// so other processes build neither (the schemas, like the tools' own
// calls for them, are sync.OnceValue). Each call returns a copy the caller
// may keep.
func makeSpec(name string, args func() *schema, describe func() string) func() llm.ToolSpec {
	spec := sync.OnceValue(func() llm.ToolSpec {
		params, err := json.Marshal(args())
		if err != nil {
			panic(fmt.Sprintf("tools: schema of %s: %v", name, err))
		}
		return llm.ToolSpec{Name: name, Description: describe(), Parameters: params}
	})
	return func() llm.ToolSpec { return cloneSpec(spec()) }
}

func cloneSpec(s llm.ToolSpec) llm.ToolSpec {
	s.Parameters = append(json.RawMessage(nil), s.Parameters...)
	return s
}
