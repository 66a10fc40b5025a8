package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/protocol"
)

// Statuses of a step of the plan.
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoDone       = "done"
)

// todoMax bounds the steps of a plan.
const todoMax = 100

// Todo is a session's plan: the steps the agent means to take and how far
// it got. It is safe for concurrent use.
type Todo struct {
	// OnChange, when set, is called with the new plan after each Set, in
	// the order of the Sets: the session shows its subscribers the change.
	OnChange func(items []protocol.TodoItem)

	mu    sync.Mutex
	items []protocol.TodoItem // guarded by mu
}

// Items returns a copy of the plan's steps, in order.
func (t *Todo) Items() []protocol.TodoItem {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.items)
}

// Set replaces the plan with a copy of items.
func (t *Todo) Set(items []protocol.TodoItem) {
	items = slices.Clone(items)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.items = items
	if t.OnChange != nil {
		t.OnChange(slices.Clone(items))
	}
}

type todoArgs struct {
	Items []protocol.TodoItem `json:"items"`
}

var todoSchema = sync.OnceValue(func() *schema {
	status := str("pending, in_progress or done.")
	status.Enum = []string{TodoPending, TodoInProgress, TodoDone}
	items := &schema{
		Type:        "array",
		Description: "Every step of the plan, in order; an empty list clears the plan.",
		Items: object(props{
			"text":   nonEmpty("What the step does, in a few words."),
			"status": status,
		}, "text", "status"),
	}
	items.MaxItems = new(int)
	*items.MaxItems = todoMax
	return object(props{"items": items}, "items")
})

var todoSpec = makeSpec("todo", todoSchema, func() string {
	return fmt.Sprintf(
		"Write down your plan for the task as a list of steps, each pending, in_progress or done, and keep "+
			"it current as you work: every call replaces the whole plan, so send every step each time. The "+
			"person watching sees the plan. Use it for work of several steps; mark a step in_progress before "+
			"starting it and done as soon as it is finished. At most %d steps.", todoMax)
})

type todoTool struct{}

func (todoTool) Spec() llm.ToolSpec { return todoSpec() }

// ReadOnly is true although the tool changes the session's plan: the
// approval policy guards the user's files and shell, which the plan is
// neither, so a read-only session may still keep a plan without asking.
func (todoTool) ReadOnly() bool { return true }

func (todoTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a todoArgs
	if bad, ok := decode("todo", todoSchema(), raw, &a); !ok {
		return bad
	}
	if env.Todo == nil {
		return failf("todo", "this session keeps no plan")
	}
	env.Todo.Set(a.Items)
	if len(a.Items) == 0 {
		return Result{Content: "the plan is cleared"}
	}
	return Result{Content: Checklist(a.Items)}
}

// Checklist renders a plan as a checklist: "[x]" done, "[~]" in progress,
// "[ ]" pending, under a line counting each.
func Checklist(items []protocol.TodoItem) string {
	var b strings.Builder
	count := map[string]int{}
	for _, it := range items {
		count[it.Status]++
	}
	fmt.Fprintf(&b, "plan: %d steps, %d done, %d in progress, %d pending\n",
		len(items), count[TodoDone], count[TodoInProgress], count[TodoPending])
	for _, it := range items {
		mark := "[ ]"
		switch it.Status {
		case TodoDone:
			mark = "[x]"
		case TodoInProgress:
			mark = "[~]"
		}
		fmt.Fprintf(&b, "%s %s\n", mark, it.Text)
	}
	return b.String()
}
