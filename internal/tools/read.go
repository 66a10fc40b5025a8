package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

// Bounds of the read tool.
const (
	readDefaultLimit = 2000
	// readMaxLine is the longest line shown whole, in bytes.
	readMaxLine = 2000
	// readMaxOutput bounds the whole answer, in bytes.
	readMaxOutput = 256 << 10
)

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

var readSchema = sync.OnceValue(func() *schema {
	return object(props{
		"path":   nonEmpty("The file to read, absolute or relative to the working directory."),
		"offset": integer("The line to start at, counting from 1 (default 1).", 1, 0).withDefault(1),
		"limit":  integer(fmt.Sprintf("How many lines to read (default %d).", readDefaultLimit), 1, 0).withDefault(readDefaultLimit),
	}, "path")
})

var readSpec = makeSpec("read", readSchema, func() string {
	return fmt.Sprintf(
		"Read a text file and return its lines numbered from 1, like cat -n (number, tab, text). "+
			"Reads %d lines from offset unless limit says otherwise; when the file goes on, the answer "+
			"ends with the offset to continue from. Lines longer than %d bytes are cut, and the answer "+
			"stops at %d KiB. Directories and binary files are refused: use ls for a directory. The line "+
			"numbers are not part of the file: leave them out of an edit's old_string.",
		readDefaultLimit, readMaxLine, readMaxOutput>>10)
})

type readTool struct{}

func (readTool) Spec() llm.ToolSpec { return readSpec() }

// ReadOnly is true: reading changes nothing.
func (readTool) ReadOnly() bool { return true }

func (readTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a readArgs
	if bad, ok := decode("read", readSchema(), raw, &a); !ok {
		return bad
	}
	offset, limit := max(a.Offset, 1), a.Limit
	if limit == 0 {
		limit = readDefaultLimit
	}
	f, err := os.Open(resolve(env, a.Path))
	if err != nil {
		return failf("read", "%s: %s", a.Path, describe(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return failf("read", "%s: %s", a.Path, describe(err))
	}
	if info.IsDir() {
		return failf("read", "%s is a directory; use ls to list it", a.Path)
	}
	if !info.Mode().IsRegular() {
		return failf("read", "%s is not a regular file", a.Path)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return failf("read", "%s: %s", a.Path, describe(err))
	}
	if isBinary(head) {
		return failf("read", "%s is a binary file", a.Path)
	}
	if len(head) == 0 {
		return Result{Content: fmt.Sprintf("(%s is empty)", a.Path)}
	}

	lines := &lineReader{br: br, max: readMaxLine}
	var b strings.Builder
	n := 0 // lines read so far
	for {
		if n%1024 == 0 && ctx.Err() != nil {
			return failf("read", "%s: stopped: %s", a.Path, why(ctx))
		}
		line, cut, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return failf("read", "%s: %s", a.Path, describe(err))
		}
		n++
		if n < offset {
			continue
		}
		if n >= offset+limit {
			fmt.Fprintf(&b, "… the file goes on; continue with offset %d\n", n)
			return Result{Content: b.String()}
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if cut > 0 {
			text = strings.ToValidUTF8(string(line[:completeUTF8(line)]), "\uFFFD") +
				fmt.Sprintf(" … (line cut: %d more bytes)", cut)
		}
		entry := fmt.Sprintf("%6d\t%s\n", n, text)
		if b.Len()+len(entry) > readMaxOutput {
			fmt.Fprintf(&b, "… output limit of %d KiB reached; continue with offset %d\n", readMaxOutput>>10, n)
			return Result{Content: b.String()}
		}
		b.WriteString(entry)
	}
	if n < offset {
		return failf("read", "offset %d is past the end of %s, which has %d lines", offset, a.Path, n)
	}
	return Result{Content: b.String()}
}
