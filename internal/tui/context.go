package tui

import (
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd/protocol"
)

// InstructionsNote says which project instruction files a turn's model
// was given: "instructions: /p/AGENTS.md, /p/sub/CLAUDE.md (cut to 512
// bytes)".
func InstructionsNote(files []protocol.InstructionFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Path
		if f.Truncated {
			names[i] += fmt.Sprintf(" (cut to %d bytes)", f.Bytes)
		}
	}
	return "instructions: " + strings.Join(names, ", ")
}
