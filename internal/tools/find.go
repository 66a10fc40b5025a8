package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

// findMax is how many paths find shows.
const findMax = 1000

type findArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

var findSchema = sync.OnceValue(func() *schema {
	return object(props{
		"pattern": nonEmpty(`A glob: * and ? match within a name, [abc] a class, ** any number of directories. ` +
			`A pattern without a slash matches names at any depth ("*.go"); one with a slash matches the ` +
			`whole path from the search root ("cmd/**/main.go").`),
		"path": str("The directory to search, absolute or relative to the working directory (default: the working directory)."),
	}, "pattern")
})

var findSpec = makeSpec("find", findSchema, func() string {
	return fmt.Sprintf(
		"Find files and directories whose path matches a glob pattern, searching a directory tree. "+
			"Answers the matching paths relative to the searched directory, sorted (a directory's entries "+
			"follow it), directories ending with a slash; .git and node_modules are not searched. At most %d paths are shown. Use grep to search "+
			"file contents.", findMax)
})

type findTool struct{}

func (findTool) Spec() llm.ToolSpec { return findSpec() }

// ReadOnly is true: searching changes nothing.
func (findTool) ReadOnly() bool { return true }

func (findTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a findArgs
	if bad, ok := decode("find", findSchema(), raw, &a); !ok {
		return bad
	}
	glob, err := newGlob(a.Pattern)
	if err != nil {
		return failf("find", "%v", err)
	}
	name := a.Path
	if name == "" {
		name = "."
	}
	root := resolve(env, name)
	if info, err := os.Stat(root); err != nil {
		return failf("find", "%s: %s", name, describe(err))
	} else if !info.IsDir() {
		return failf("find", "%s is not a directory", name)
	}
	// WalkDir visits names in lexical order, directory by directory, so
	// the first findMax matches are the first in sorted order.
	var matches []string
	total, unreadable := 0, 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == root {
				return err
			}
			unreadable++
			return nil
		}
		if p == root {
			return nil
		}
		if d.IsDir() && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if glob.match(rel) {
			total++
			if len(matches) < findMax {
				if d.IsDir() {
					rel += "/"
				}
				matches = append(matches, rel)
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return failf("find", "stopped: %s", why(ctx))
		}
		return failf("find", "%s: %s", name, describe(err))
	}
	if len(matches) == 0 {
		return Result{Content: fmt.Sprintf("no paths under %s match %s", name, a.Pattern)}
	}
	var b strings.Builder
	for _, m := range matches {
		b.WriteString(m)
		b.WriteByte('\n')
	}
	if total > len(matches) {
		fmt.Fprintf(&b, "… and %d more; narrow the pattern or the path\n", total-len(matches))
	}
	if unreadable > 0 {
		fmt.Fprintf(&b, "(%d entries could not be read)\n", unreadable)
	}
	return Result{Content: b.String()}
}
