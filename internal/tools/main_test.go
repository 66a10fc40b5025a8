package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// run calls tool with the JSON arguments args in env.
func run(t *testing.T, tool Tool, env *Env, args string) Result {
	t.Helper()
	return tool.Run(context.Background(), env, json.RawMessage(args))
}

// mustOK fails the test unless r is a success, and returns its content.
func mustOK(t *testing.T, r Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error result: %s", r.Content)
	}
	return r.Content
}

// mustFail fails the test unless r is an error result containing every one
// of wants.
func mustFail(t *testing.T, r Result, wants ...string) {
	t.Helper()
	if !r.IsError {
		t.Fatalf("want an error result, got success: %s", r.Content)
	}
	for _, w := range wants {
		if !strings.Contains(r.Content, w) {
			t.Fatalf("error result %q does not say %q", r.Content, w)
		}
	}
}

// args marshals v as tool arguments.
func args(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeFiles creates files under dir from a map of slash paths to contents.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
