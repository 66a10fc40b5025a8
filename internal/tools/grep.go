package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

// Bounds of the grep tool.
const (
	grepMax = 200 // matches shown
	// grepMaxLine is the longest line searched whole, in bytes.
	grepMaxLine = 64 << 10
	// grepShowLine is the longest matching line shown whole, in bytes.
	grepShowLine = 500
)

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
}

var grepSchema = sync.OnceValue(func() *schema {
	return object(props{
		"pattern":     nonEmpty("A regular expression in Go's RE2 syntax (no backreferences or lookaround), matched against each line."),
		"path":        str("The file or directory to search, absolute or relative to the working directory (default: the working directory)."),
		"glob":        str(`Search only files whose path matches this glob, as in find ("*.go", "internal/**/*_test.go").`),
		"ignore_case": boolean("Match letters regardless of case (default false).").withDefault(false),
	}, "pattern")
})

var grepSpec = makeSpec("grep", grepSchema, func() string {
	return fmt.Sprintf(
		"Search file contents for lines matching a regular expression, in a file or a directory tree. "+
			"Answers one line per match as path:line: text, with paths as you would pass them to read, in "+
			"sorted order. Binary files, .git and node_modules are skipped. At most %d matches are shown and "+
			"long lines are cut; narrow the pattern, path or glob when there are more.", grepMax)
})

type grepTool struct{}

func (grepTool) Spec() llm.ToolSpec { return grepSpec() }

// ReadOnly is true: searching changes nothing.
func (grepTool) ReadOnly() bool { return true }

// errEnough stops a walk once enough matches were found.
var errEnough = errors.New("enough matches")

func (grepTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a grepArgs
	if bad, ok := decode("grep", grepSchema(), raw, &a); !ok {
		return bad
	}
	expr := a.Pattern
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return failf("grep", "bad pattern: %v", err)
	}
	var glob *globMatcher
	if a.Glob != "" {
		if glob, err = newGlob(a.Glob); err != nil {
			return failf("grep", "glob: %v", err)
		}
	}
	name := a.Path
	if name == "" {
		name = "."
	}
	root := resolve(env, name)
	info, err := os.Stat(root)
	if err != nil {
		return failf("grep", "%s: %s", name, describe(err))
	}

	s := &grepSearch{ctx: ctx, re: re}
	if !info.IsDir() {
		if err := s.file(root, name); err != nil && !errors.Is(err, errEnough) && ctx.Err() == nil {
			return failf("grep", "%s: %s", name, describe(err))
		}
	} else {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				if p == root {
					return err
				}
				s.unreadable++
				return nil
			}
			if d.IsDir() {
				if p != root && skipDir(d.Name()) {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return nil
			}
			rel = filepath.ToSlash(rel)
			if glob != nil && !glob.match(rel) {
				return nil
			}
			shown := rel
			if name != "." {
				shown = path.Join(filepath.ToSlash(name), rel)
			}
			if err := s.file(p, shown); err != nil {
				if errors.Is(err, errEnough) {
					return err
				}
				s.unreadable++
			}
			return nil
		})
		if err != nil && !errors.Is(err, errEnough) {
			if ctx.Err() != nil {
				return failf("grep", "stopped: %s", why(ctx))
			}
			return failf("grep", "%s: %s", name, describe(err))
		}
	}
	if ctx.Err() != nil {
		return failf("grep", "stopped: %s", why(ctx))
	}

	var b strings.Builder
	for _, m := range s.matches {
		b.WriteString(m)
		b.WriteByte('\n')
	}
	if len(s.matches) == 0 {
		fmt.Fprintf(&b, "no matches for %s in %s\n", a.Pattern, name)
	}
	if s.more {
		fmt.Fprintf(&b, "… stopped after %d matches; narrow the pattern, path or glob\n", grepMax)
	}
	if s.unreadable > 0 {
		fmt.Fprintf(&b, "(%d files could not be read)\n", s.unreadable)
	}
	return Result{Content: b.String()}
}

// grepSearch gathers the matches of one grep call.
type grepSearch struct {
	ctx        context.Context
	re         *regexp.Regexp
	matches    []string
	more       bool // a match past grepMax was found
	unreadable int
}

// file searches one file, shown as shown. Binary files are skipped. It
// returns errEnough once grepMax matches are gathered and another is found.
func (s *grepSearch) file(p, shown string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return err
	}
	if isBinary(head) {
		return nil
	}
	lines := &lineReader{br: br, max: grepMaxLine}
	for n := 1; ; n++ {
		if n%4096 == 0 && s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		line, _, err := lines.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !s.re.Match(line) {
			continue
		}
		if len(s.matches) == grepMax {
			s.more = true
			return errEnough
		}
		text := line
		suffix := ""
		if len(text) > grepShowLine {
			text = text[:completeUTF8(text[:grepShowLine])]
			suffix = " …"
		}
		s.matches = append(s.matches, fmt.Sprintf("%s:%d: %s%s", shown, n, strings.ToValidUTF8(string(text), "\uFFFD"), suffix))
	}
}
