package tui

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The libraries the screen links whose initialisers did work every agentd
// process paid for, though only the screen uses it: goldmark's regular
// expressions and case-folding table, and the clipboard's search of PATH.
// Their copies (third_party) do it on first use: in this process, which
// links them as agentd does, the clipboard runs no initialiser, and
// goldmark's allocate a few KB (the eager ones took about 250 KB).
func TestTheScreensLibrariesDoNoWorkAtStart(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	traced := 0
	for line := range strings.Lines(string(out)) {
		// init github.com/yuin/goldmark/parser @0.4 ms, 0.2 ms clock, 9000 bytes, 100 allocs
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "init" {
			continue
		}
		traced++
		switch pkg := fields[1]; {
		case pkg == "github.com/atotto/clipboard":
			t.Errorf("%s runs an initialiser at start: %s", pkg, strings.TrimSpace(line))
		case strings.HasPrefix(pkg, "github.com/yuin/goldmark/"):
			if b := allocated(fields); b > 16<<10 {
				t.Errorf("%s's initialisers allocate %d bytes at start: %s", pkg, b, strings.TrimSpace(line))
			}
		}
	}
	if traced == 0 {
		t.Fatalf("no initialiser traced: does GODEBUG=inittrace=1 still print them?\n%s", out)
	}
}

// allocated returns the bytes an inittrace line's initialisers allocated:
// the number before "bytes,".
func allocated(fields []string) int {
	for i, f := range fields {
		if f == "bytes," && i > 0 {
			n, _ := strconv.Atoi(fields[i-1])
			return n
		}
	}
	return 0
}
