package acp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
)

func TestABatcherStopsItsWritersAtItsBoundAndLetsThemGoOnClose(t *testing.T) {
	r, w := io.Pipe()
	b := newBatcher(w)
	// Nobody reads r: the first write goes to the pipe and blocks there,
	// the queue fills to its bound, and the next write waits.
	line := bytes.Repeat([]byte("x"), 64<<10)
	wrote := make(chan error, 1)
	go func() {
		for {
			if _, err := b.Write(line); err != nil {
				wrote <- err
				return
			}
		}
	}()
	poll.Until(t, "the queue to fill to its bound", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.buf)+len(line) > maxQueued
	})
	b.mu.Lock()
	held := len(b.buf)
	b.mu.Unlock()
	if held > maxQueued {
		t.Fatalf("the queue holds %d bytes, past its bound of %d", held, maxQueued)
	}
	b.Close()
	if err := <-wrote; !errors.Is(err, errWriterClosed) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the waiting write ended with %v", err)
	}
	r.Close()
}

func TestAPromptIsItsTextBlocksAndAnythingElseIsRefusedByIndex(t *testing.T) {
	for _, c := range []struct {
		name   string
		blocks []sdk.ContentBlock
		want   string
		err    string
	}{
		{"text", []sdk.ContentBlock{sdk.TextBlock("fix it"), sdk.TextBlock("now")}, "fix it\nnow", ""},
		{"a link", []sdk.ContentBlock{sdk.TextBlock("see"), sdk.ResourceLinkBlock("main.go", "file:///w/main.go")}, "see\nfile:///w/main.go", ""},
		{"an embedded file", []sdk.ContentBlock{sdk.ResourceBlock(sdk.EmbeddedResourceResource{TextResourceContents: &sdk.TextResourceContents{Uri: "file:///w/a.txt", Text: "hi"}})}, "file:///w/a.txt:\n```\nhi\n```", ""},
		{"an image", []sdk.ContentBlock{sdk.TextBlock("look"), sdk.ImageBlock("AAAA", "image/png")}, "", "prompt[1]"},
		{"nothing", []sdk.ContentBlock{sdk.TextBlock("  ")}, "", "prompt: holds no text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := promptText(c.blocks)
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one naming %q", err, c.err)
			case c.err == "" && (err != nil || got != c.want):
				t.Fatalf("%q, %v; want %q", got, err, c.want)
			}
		})
	}
}
