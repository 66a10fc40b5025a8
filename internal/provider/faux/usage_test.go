package faux_test

import (
	"context"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider/faux"
)

// Scripted or not, a reply reports tokens counted from the text: a word of
// the request is an input token, a delta or a tool call an output token;
// it has no cost.
func TestTheFauxModelReportsUsageCountedFromItsText(t *testing.T) {
	s, err := faux.ParseScript([]byte(`{"replies":[{"steps":[{"text":"one "},{"text":"two"},{"tool":"bash","arguments":{"command":"ls"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{System: "be brief", Messages: []llm.Message{userText("list the files")}}
	nop := func(llm.Event) error { return nil }
	scripted, err := faux.NewScripted(s).Stream(context.Background(), req, nop)
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.Usage{InputTokens: 5, OutputTokens: 3}); scripted.Usage != want {
		t.Errorf("scripted usage = %+v, want %+v", scripted.Usage, want)
	}
	p, _ := faux.New(faux.Config{})
	free, err := p.Stream(context.Background(), req, nop)
	if err != nil {
		t.Fatal(err)
	}
	if free.Usage.InputTokens != 5 || free.Usage.OutputTokens == 0 || free.Usage.Priced {
		t.Errorf("usage = %+v, want 5 in, some out, no cost", free.Usage)
	}
}
