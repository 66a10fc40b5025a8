package tools

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

func TestTodoReplacesThePlanAndEchoesItAsAChecklist(t *testing.T) {
	t.Parallel()
	env := &Env{Cwd: t.TempDir(), Todo: &Todo{}}
	env.Todo.Set([]protocol.TodoItem{{Text: "old step", Status: TodoPending}})
	got := mustOK(t, run(t, todoTool{}, env, `{"items": [
		{"text": "read the failing test", "status": "done"},
		{"text": "fix the parser", "status": "in_progress"},
		{"text": "run the tests", "status": "pending"}]}`))
	want := "plan: 3 steps, 1 done, 1 in progress, 1 pending\n" +
		"[x] read the failing test\n[~] fix the parser\n[ ] run the tests\n"
	if got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	wantItems := []protocol.TodoItem{
		{Text: "read the failing test", Status: "done"},
		{Text: "fix the parser", Status: "in_progress"},
		{Text: "run the tests", Status: "pending"},
	}
	if items := env.Todo.Items(); !slices.Equal(items, wantItems) {
		t.Errorf("Items() = %v", items)
	}
	if got := mustOK(t, run(t, todoTool{}, env, `{"items": []}`)); got != "the plan is cleared" {
		t.Errorf("content = %q", got)
	}
	if items := env.Todo.Items(); len(items) != 0 {
		t.Errorf("Items() after clearing = %v", items)
	}
}

func TestTodoRefusesEmptyStepsTooManyStepsAndAMissingPlan(t *testing.T) {
	t.Parallel()
	env := &Env{Todo: &Todo{}}
	mustFail(t, run(t, todoTool{}, env, `{"items": [{"text": "", "status": "done"}]}`), `argument "items[0].text" must not be empty`)
	many := make([]protocol.TodoItem, todoMax+1)
	for i := range many {
		many[i] = protocol.TodoItem{Text: fmt.Sprint("step ", i), Status: TodoPending}
	}
	mustFail(t, run(t, todoTool{}, env, args(t, map[string]any{"items": many})), `argument "items" must have at most 100 items, got 101`)
	mustFail(t, run(t, todoTool{}, &Env{}, `{"items": []}`), "todo: this session keeps no plan")
}

func TestTodoItemsAreCopiesSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	var todo Todo
	items := []protocol.TodoItem{{Text: "a", Status: TodoPending}}
	todo.Set(items)
	items[0].Text = "changed by the caller"
	got := todo.Items()
	got[0].Status = TodoDone
	if again := todo.Items(); again[0] != (protocol.TodoItem{Text: "a", Status: TodoPending}) {
		t.Errorf("the plan shares memory with its callers: %v", again)
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				if i%2 == 0 {
					todo.Set([]protocol.TodoItem{{Text: fmt.Sprint(i, j), Status: TodoInProgress}})
				} else if n := len(todo.Items()); n != 1 {
					t.Errorf("a plan of %d steps appeared", n)
				}
			}
		})
	}
	wg.Wait()
}
