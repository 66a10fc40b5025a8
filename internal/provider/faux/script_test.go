package faux_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func TestTheExampleScriptPlaysEveryKindOfStep(t *testing.T) {
	path := filepath.Join("testdata", "example.json")
	p, err := faux.New(faux.Config{ScriptPath: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := llm.Request{Messages: []llm.Message{userText("anything: the script ignores it")}}

	// Reply 1: thinking, text around a delay, a tool call.
	var rec providertest.Recorder
	reply, err := p.Stream(ctx, req, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	call := &llm.ToolCall{ID: "call-ls", Name: "bash"}
	full := &llm.ToolCall{ID: "call-ls", Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la"}`)}
	wantEvents := []llm.Event{
		{Kind: llm.EventThinking, Text: "The user wants the files listed. "},
		{Kind: llm.EventThinking, Text: "I will run ls."},
		{Kind: llm.EventText, Text: "Listing "},
		{Kind: llm.EventText, Text: "the files."},
		{Kind: llm.EventToolCallStart, ToolCall: call},
		{Kind: llm.EventToolCallDelta, Text: `{"command":"ls -la"}`, ToolCall: call},
		{Kind: llm.EventToolCall, ToolCall: full},
	}
	if got := rec.Events(); !reflect.DeepEqual(got, wantEvents) {
		t.Errorf("reply 1 events =\n%+v\nwant\n%+v", got, wantEvents)
	}
	wantParts := []llm.Part{
		{Type: llm.PartThinking, Text: "The user wants the files listed. I will run ls."},
		{Type: llm.PartText, Text: "Listing the files."},
		{Type: llm.PartToolCall, ToolCall: full},
	}
	if !reflect.DeepEqual(reply.Message.Parts, wantParts) || reply.StopReason != llm.StopToolUse {
		t.Errorf("reply 1 = %+v", reply)
	}

	// Reply 2: an overload asking for a wait.
	_, err = p.Stream(ctx, req, func(llm.Event) error { return nil })
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 529 || !pe.Retryable || err.Error() != "faux: overloaded (HTTP 529)" {
		t.Errorf("reply 2 error = %v (%+v)", err, pe)
	}
	if d, ok := provider.RetryAfter(err); !ok || d != time.Second {
		t.Errorf("reply 2 retry-after = %v, %v", d, ok)
	}

	// Reply 3: plain text.
	reply, err = p.Stream(ctx, req, func(llm.Event) error { return nil })
	if err != nil || reply.Message.Text() != "The directory holds two files." || reply.StopReason != llm.StopEnd {
		t.Errorf("reply 3 = %+v, %v", reply, err)
	}

	// Reply 4: a hundred thousand deltas.
	n := 0
	reply, err = p.Stream(ctx, req, func(ev llm.Event) error {
		if ev.Kind != llm.EventText || ev.Text != "x" {
			t.Fatalf("event %+v", ev)
		}
		n++
		return nil
	})
	if err != nil || n != 100000 || len(reply.Message.Text()) != 100000 {
		t.Errorf("reply 4: %d deltas, %d bytes, %v", n, len(reply.Message.Text()), err)
	}

	// Reply 5: a delta, then a failure that is not retried.
	var rec5 providertest.Recorder
	reply, err = p.Stream(ctx, req, rec5.Emit)
	if err == nil || err.Error() != "faux: scripted bad request (HTTP 400)" || provider.Retryable(err) {
		t.Errorf("reply 5 error = %v", err)
	}
	if len(rec5.Events()) != 1 || reply.Message.Text() != "Half a" {
		t.Errorf("reply 5 events = %+v, partial = %+v", rec5.Events(), reply.Message)
	}

	// Then the script is used up.
	_, err = p.Stream(ctx, req, func(llm.Event) error { return nil })
	want := path + " has no reply left for model call 6: it holds 5"
	if err == nil || !strings.Contains(err.Error(), want) || provider.Retryable(err) {
		t.Errorf("exhausted error = %v, want it to say %q", err, want)
	}
}

func TestAScriptedOverloadIsRetriedUnderAPolicy(t *testing.T) {
	s, err := faux.ParseScript([]byte(`{"replies":[
		{"steps":[{"error":{"status":529}}]},
		{"steps":[{"error":{"status":429,"retryAfter":"3s"}}]},
		{"steps":[{"text":"made it"}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	var waits providertest.Waits
	p := provider.WithRetry(faux.NewScripted(s), provider.RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: time.Minute, Wait: waits.Wait})
	reply, err := p.Stream(context.Background(), llm.Request{}, func(llm.Event) error { return nil })
	if err != nil || reply.Message.Text() != "made it" {
		t.Fatalf("reply = %+v, %v", reply, err)
	}
	if w := waits.All(); len(w) != 2 || w[1] != 3*time.Second {
		t.Errorf("waits = %v, want a backoff then 3s", w)
	}
}

func TestADelayEndsWithTheContext(t *testing.T) {
	s, err := faux.ParseScript([]byte(`{"replies":[{"steps":[{"text":"before"},{"delay":"1h"},{"text":"after"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := faux.NewScripted(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var texts []string
	_, err = p.Stream(ctx, llm.Request{}, func(ev llm.Event) error {
		texts = append(texts, ev.Text)
		cancel() // the delay that follows must end now, not in an hour
		return nil
	})
	if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(texts, []string{"before"}) {
		t.Errorf("err = %v, texts = %q", err, texts)
	}
}

func TestScriptDecodingIsStrictAndSaysWhere(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"unknown top field", `{"replies":[],"replys":[]}`, `script: unknown field "replys"`},
		{"unknown reply field", `{"replies":[{"steps":[],"stepz":1}]}`, `script: reply 1: unknown field "stepz"`},
		{"unknown step field", `{"replies":[{"steps":[{"text":"a"}]},{"steps":[{"text":"a"},{"txt":"b"}]}]}`, `script: reply 2, step 2: unknown field "txt"`},
		{"unknown error field", `{"replies":[{"steps":[{"error":{"status":500,"retry":"1s"}}]}]}`, `script: reply 1, step 1: "error": unknown field "retry"`},
		{"no replies", `{}`, `script: no "replies" list`},
		{"no steps", `{"replies":[{}]}`, `script: reply 1: no "steps" list`},
		{"no kind", `{"replies":[{"steps":[{"comment":"x"}]}]}`, `script: reply 1, step 1: a step needs one of "text", "thinking", "delay", "tool" or "error"`},
		{"two kinds", `{"replies":[{"steps":[{"text":"a","delay":"1s"}]}]}`, `a step has one kind, this one has "text" and "delay"`},
		{"bad delay", `{"replies":[{"steps":[{"delay":"soon"}]}]}`, `"delay" is "soon", not a duration such as "250ms" or "2s"`},
		{"negative delay", `{"replies":[{"steps":[{"delay":"-1s"}]}]}`, `"delay" is -1s; it must be from 0 to 1h0m0s`},
		{"repeat zero", `{"replies":[{"steps":[{"repeat":0,"text":"x"}]}]}`, `"repeat" is 0; it must be from 1 to 10000000`},
		{"repeat without text", `{"replies":[{"steps":[{"repeat":3,"tool":"bash"}]}]}`, `"repeat" goes with "text" or "thinking" only`},
		{"arguments without tool", `{"replies":[{"steps":[{"text":"a","arguments":{}}]}]}`, `"arguments" and "id" go with "tool" only`},
		{"arguments not an object", `{"replies":[{"steps":[{"tool":"bash","arguments":"ls"}]}]}`, `"arguments" must be a JSON object`},
		{"empty tool", `{"replies":[{"steps":[{"tool":" "}]}]}`, `"tool" names the tool; it is empty`},
		{"bad status", `{"replies":[{"steps":[{"error":{"status":700}}]}]}`, `status 700 is not an HTTP status`},
		{"empty error", `{"replies":[{"steps":[{"error":{}}]}]}`, `"error" needs a "status", a "message", or both`},
		{"step after error", `{"replies":[{"steps":[{"error":{"status":500}},{"text":"never"}]}]}`, `reply 1, step 2: no step can follow an error, which ends the reply`},
		{"wrong type", `{"replies":[{"steps":[{"text":3}]}]}`, `"text" must be a string, not number`},
		{"trailing data", `{"replies":[]} {}`, `script: data after the JSON object`},
		{"not an object", `[]`, `script: not a JSON object`},
		{"empty", ``, `script: empty`},
		{"broken", `{"replies":[`, `script: unexpected EOF`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := faux.ParseScript([]byte(tc.script))
			if err == nil {
				t.Fatalf("no error for %s", tc.script)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestNewNamesTheScriptThatWouldNotLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := faux.New(faux.Config{ScriptPath: filepath.Join(dir, "missing.json")}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file error = %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"replies":[{"steps":[{"txt":"a"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := faux.New(faux.Config{ScriptPath: bad})
	if err == nil || !strings.Contains(err.Error(), bad+`: script: reply 1, step 1: unknown field "txt"`) {
		t.Errorf("bad script error = %v", err)
	}
}

func TestConcurrentCallsEachTakeTheirOwnReply(t *testing.T) {
	const n = 50
	raw := `{"replies":[`
	for i := range n {
		if i > 0 {
			raw += ","
		}
		raw += fmt.Sprintf(`{"steps":[{"text":"%d"}]}`, i)
	}
	s, err := faux.ParseScript([]byte(raw + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	p := faux.NewScripted(s)
	var wg sync.WaitGroup
	got := make(chan string, n)
	for range n {
		wg.Go(func() {
			reply, err := p.Stream(context.Background(), llm.Request{}, func(llm.Event) error { return nil })
			if err != nil {
				t.Error(err)
			}
			got <- reply.Message.Text()
		})
	}
	wg.Wait()
	close(got)
	seen := map[string]bool{}
	for text := range got {
		if seen[text] {
			t.Errorf("reply %s played twice", text)
		}
		seen[text] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct replies, want %d", len(seen), n)
	}
}

func TestAScriptStatesItsModelsWindowAndMayLeaveTheRepliesToTheDefault(t *testing.T) {
	s, err := faux.ParseScript([]byte(`{"contextWindow": 4096}`))
	if err != nil {
		t.Fatal(err)
	}
	p := faux.NewScripted(s)
	if info := llm.Describe(p, "echo"); info.ContextWindow != 4096 || !info.Known {
		t.Fatalf("Describe: %+v, want a known window of 4096", info)
	}
	reply, err := p.Stream(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "hello"}}}}}, func(llm.Event) error { return nil })
	if err != nil || !strings.Contains(reply.Message.Text(), "hello") {
		t.Fatalf("a script without replies answers by the default: %q, %v", reply.Message.Text(), err)
	}
	summary, err := p.Stream(t.Context(), llm.Request{System: llm.SummarySystem, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText,
		Text: "Summarize this conversation:\n\nuser: fix the lexer\nassistant: done\nuser: now the parser"}}}}}, func(llm.Event) error { return nil })
	if err != nil || !strings.Contains(summary.Message.Text(), "fix the lexer | now the parser") {
		t.Fatalf("summary: %q, %v", summary.Message.Text(), err)
	}
	if info := llm.Describe(faux.NewScripted(&faux.Script{Scripted: true}), "echo"); info.Known || info.ContextWindow != llm.DefaultContextWindow {
		t.Fatalf("a script stating no window: %+v", info)
	}
	for _, bad := range []string{`{"contextWindow": 10}`, `{"contextWindow": "big"}`, `{}`} {
		if _, err := faux.ParseScript([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestSummaryRequestsTakeTheScriptsSummariesOrNoneOfItsReplies(t *testing.T) {
	ask := func(p *faux.Provider, system string) string {
		t.Helper()
		r, err := p.Stream(t.Context(), llm.Request{System: system, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "user: hi"}}}}}, func(llm.Event) error { return nil })
		if err != nil {
			return "error: " + err.Error()
		}
		return r.Message.Text()
	}
	s, err := faux.ParseScript([]byte(`{"replies": [{"steps": [{"text": "first reply"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := faux.NewScripted(s)
	if got := ask(p, llm.SummarySystem); !strings.HasPrefix(got, "Summary of 1 earlier requests") {
		t.Fatalf("a summary without scripted summaries: %q", got)
	}
	if got := ask(p, ""); got != "first reply" {
		t.Fatalf("the reply after a summary: %q", got)
	}
	s, err = faux.ParseScript([]byte(`{"replies": [{"steps": [{"text": "reply"}]}], "summaries": [{"steps": [{"text": "scripted summary"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p = faux.NewScripted(s)
	if got := ask(p, llm.SummarySystem); got != "scripted summary" {
		t.Fatalf("a scripted summary: %q", got)
	}
	if got := ask(p, llm.SummarySystem); !strings.Contains(got, "has no summary left for model call 2: it holds 1") {
		t.Fatalf("past the scripted summaries: %q", got)
	}
	if got := ask(p, ""); got != "reply" {
		t.Fatalf("the reply: %q", got)
	}
	if _, err := faux.ParseScript([]byte(`{"replies": [], "summaries": [{"steps": [{"bogus": 1}]}]}`)); err == nil || !strings.Contains(err.Error(), "summary 1") {
		t.Fatalf("a bad summary: %v", err)
	}
}
