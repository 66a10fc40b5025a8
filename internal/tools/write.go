package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

var writeSchema = sync.OnceValue(func() *schema {
	return object(props{
		"path":    nonEmpty("The file to write, absolute or relative to the working directory."),
		"content": str("The whole new content of the file."),
	}, "path", "content")
})

var writeSpec = makeSpec("write", writeSchema, func() string {
	return "Create a file, or replace all of an existing file's content, with the given text. Missing parent " +
		"directories are created. The file is replaced in one step (a reader never sees half of it) and " +
		"keeps its permissions if it existed. To change part of an existing file, use edit instead."
})

type writeTool struct{}

func (writeTool) Spec() llm.ToolSpec { return writeSpec() }

// ReadOnly is false: it changes files.
func (writeTool) ReadOnly() bool { return false }

func (writeTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a writeArgs
	if bad, ok := decode("write", writeSchema(), raw, &a); !ok {
		return bad
	}
	if err := ctx.Err(); err != nil {
		return failf("write", "%s: not written: %s", a.Path, why(ctx))
	}
	p := resolve(env, a.Path)
	var was FileChange
	if env.Changed != nil {
		was = before(p, MaxBefore)
	}
	created, err := writeAtomic(p, []byte(a.Content))
	if err != nil {
		return failf("write", "cannot write %s: %v", a.Path, err)
	}
	changed(env, was, []byte(a.Content))
	if created {
		return Result{Content: fmt.Sprintf("created %s: wrote %d bytes", a.Path, len(a.Content))}
	}
	return Result{Content: fmt.Sprintf("replaced %s: wrote %d bytes", a.Path, len(a.Content))}
}
