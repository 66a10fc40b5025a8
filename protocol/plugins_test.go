package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// A plugin package directory that is wrong is refused naming its index.
func TestPluginInputsNameTheWrongField(t *testing.T) {
	many := make([]string, protocol.MaxPluginPackages+1)
	for i := range many {
		many[i] = "/p/" + strings.Repeat("x", i+1)
	}
	manyJSON, _ := json.Marshal(many)
	tests := []struct {
		name, input string
		into        func() any
		field       string
		reason      string
	}{
		{"a relative directory", `{"cwd":"/w","plugins":["/a","kit"]}`, func() any { return new(protocol.SessionCreateInput) }, "input.plugins[1]", "not an absolute path"},
		{"a directory twice", `{"sessionId":"s","plugins":["/a","/b","/a"]}`, func() any { return new(protocol.SessionPluginsSetInput) }, "input.plugins[2]", "given twice"},
		{"an unclean directory", `{"sessionId":"s","plugins":["/a/../b"]}`, func() any { return new(protocol.SessionPluginsSetInput) }, "input.plugins[0]", "not a clean path"},
		{"an empty directory", `{"sessionId":"s","plugins":[""]}`, func() any { return new(protocol.SessionPluginsSetInput) }, "input.plugins[0]", "is empty"},
		{"too many", `{"sessionId":"s","plugins":` + string(manyJSON) + `}`, func() any { return new(protocol.SessionPluginsSetInput) }, "input.plugins", "at most 32"},
		{"plugins not strings", `{"sessionId":"s","plugins":[1]}`, func() any { return new(protocol.SessionPluginsSetInput) }, "input.plugins", "must be a string"},
		{"a command with its slash", `{"sessionId":"s","name":"/review"}`, func() any { return new(protocol.CommandExpandInput) }, "input.name", "without its slash"},
		{"a command without a name", `{"sessionId":"s"}`, func() any { return new(protocol.CommandExpandInput) }, "input.name", "is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantDecodeError(t, protocol.DecodeInput(json.RawMessage(tt.input), tt.into()), tt.field, tt.reason)
		})
	}
	var in protocol.SessionPluginsSetInput
	if err := protocol.DecodeInput(json.RawMessage(`{"sessionId":"s","plugins":[]}`), &in); err != nil {
		t.Fatalf("no packages: %v", err)
	}
}
