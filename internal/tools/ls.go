package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

// lsMax is how many entries ls shows.
const lsMax = 1000

type lsArgs struct {
	Path string `json:"path"`
}

var lsSchema = sync.OnceValue(func() *schema {
	return object(props{
		"path": str("The directory to list, absolute or relative to the working directory (default: the working directory)."),
	})
})

var lsSpec = makeSpec("ls", lsSchema, func() string {
	return fmt.Sprintf(
		"List the entries of a directory, sorted by name, one per line; directories end with a slash. "+
			"Hidden entries are included. At most %d entries are shown. Use find to look deeper.", lsMax)
})

type lsTool struct{}

func (lsTool) Spec() llm.ToolSpec { return lsSpec() }

// ReadOnly is true: listing changes nothing.
func (lsTool) ReadOnly() bool { return true }

func (lsTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a lsArgs
	if bad, ok := decode("ls", lsSchema(), raw, &a); !ok {
		return bad
	}
	name := a.Path
	if name == "" {
		name = "."
	}
	dir := resolve(env, name)
	info, err := os.Stat(dir)
	if err != nil {
		return failf("ls", "%s: %s", name, describe(err))
	}
	if !info.IsDir() {
		return failf("ls", "%s is not a directory; use read to read a file", name)
	}
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil && len(entries) == 0 {
		return failf("ls", "%s: %s", name, describe(err))
	}
	if len(entries) == 0 {
		return Result{Content: fmt.Sprintf("(%s is empty)", name)}
	}
	var b strings.Builder
	for i, e := range entries {
		if i == lsMax {
			fmt.Fprintf(&b, "… and %d more\n", len(entries)-lsMax)
			break
		}
		b.WriteString(e.Name())
		if e.IsDir() || (e.Type()&os.ModeSymlink != 0 && isDir(dir+string(os.PathSeparator)+e.Name())) {
			b.WriteByte('/')
		}
		b.WriteByte('\n')
	}
	return Result{Content: b.String()}
}

// isDir reports whether p is, or links to, a directory.
func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}
