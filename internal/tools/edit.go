package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

type editArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

var editSchema = sync.OnceValue(func() *schema {
	return object(props{
		"path":        nonEmpty("The file to change, absolute or relative to the working directory."),
		"old_string":  nonEmpty("The exact text to replace, whitespace included, without read's line numbers."),
		"new_string":  str("The text to put in its place (may be empty, to delete old_string)."),
		"replace_all": boolean("Replace every occurrence of old_string rather than requiring it to be unique (default false).").withDefault(false),
	}, "path", "old_string", "new_string")
})

var editSpec = makeSpec("edit", editSchema, func() string {
	return "Replace exact text in an existing file. old_string must match the file byte for byte, indentation " +
		"included, and must appear exactly once unless replace_all is set: when it appears several times, " +
		"include more of the surrounding lines to make it unique. Read the file first. The file is " +
		"replaced in one step and keeps its permissions. To create a file or rewrite it whole, use write."
})

type editTool struct{}

func (editTool) Spec() llm.ToolSpec { return editSpec() }

// ReadOnly is false: it changes files.
func (editTool) ReadOnly() bool { return false }

func (editTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a editArgs
	if bad, ok := decode("edit", editSchema(), raw, &a); !ok {
		return bad
	}
	if a.OldString == a.NewString {
		return failf("edit", "old_string and new_string are the same; there is nothing to change")
	}
	p := resolve(env, a.Path)
	info, err := os.Stat(p)
	if err != nil {
		return failf("edit", "%s: %s", a.Path, describe(err))
	}
	if info.IsDir() {
		return failf("edit", "%s is a directory", a.Path)
	}
	if !info.Mode().IsRegular() {
		return failf("edit", "%s is not a regular file", a.Path)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return failf("edit", "%s: %s", a.Path, describe(err))
	}
	text := string(data)
	n := strings.Count(text, a.OldString)
	switch {
	case n == 0:
		return failf("edit", "old_string not found in %s; read the file and copy the text exactly", a.Path)
	case n > 1 && !a.ReplaceAll:
		return failf("edit", "old_string appears %d times in %s; add context or set replace_all", n, a.Path)
	}
	line := 1 + strings.Count(text[:strings.Index(text, a.OldString)], "\n")
	if a.ReplaceAll {
		text = strings.ReplaceAll(text, a.OldString, a.NewString)
	} else {
		text = strings.Replace(text, a.OldString, a.NewString, 1)
	}
	if err := ctx.Err(); err != nil {
		return failf("edit", "%s: not changed: %s", a.Path, why(ctx))
	}
	if _, err := writeAtomic(p, []byte(text)); err != nil {
		return failf("edit", "cannot write %s: %v", a.Path, err)
	}
	if env.Changed != nil {
		was := FileChange{Path: p, Existed: true, BeforeSize: int64(len(data))}
		if target, err := filepath.EvalSymlinks(p); err == nil {
			was.Path = target
		}
		if len(data) > MaxBefore {
			was.TooLarge = true
		} else {
			was.Before = data
		}
		changed(env, was, []byte(text))
	}
	if n == 1 {
		return Result{Content: fmt.Sprintf("edited %s: replaced 1 occurrence at line %d", a.Path, line)}
	}
	return Result{Content: fmt.Sprintf("edited %s: replaced %d occurrences, the first at line %d", a.Path, n, line)}
}
