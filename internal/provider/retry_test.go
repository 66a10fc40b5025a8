package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

var overloaded = &llm.ProviderError{Provider: "anthropic", Status: 529, Message: "overloaded", Retryable: true}

func noEmit(llm.Event) error { return nil }

func TestRetryRecoversBeforeTheReplyBegins(t *testing.T) {
	s := &stub{name: "anthropic", results: []stubResult{{err: overloaded}, {err: overloaded}, {events: []llm.Event{{Kind: llm.EventText, Text: "ok"}}}}}
	var waits providertest.Waits
	p := provider.WithRetry(s, provider.RetryPolicy{Attempts: 4, BaseDelay: 10 * time.Millisecond, Wait: waits.Wait})
	var got, notices []llm.Event
	_, err := p.Stream(context.Background(), llm.Request{}, func(ev llm.Event) error {
		if ev.Kind == llm.EventRetry {
			notices = append(notices, ev)
		} else {
			got = append(got, ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.calls != 3 || len(got) != 1 {
		t.Errorf("calls = %d, events = %v", s.calls, got)
	}
	// Each wait was announced before it began, with the failure.
	if len(notices) != 2 || notices[0].Retry.Attempt != 1 || notices[1].Retry.Attempt != 2 || notices[1].Retry.MaxAttempts != 4 ||
		notices[0].Retry.Reason != "anthropic: overloaded (HTTP 529)" {
		t.Errorf("retry notices = %+v", notices)
	}
	w := waits.All()
	if len(notices) == 2 && (notices[0].Retry.Delay != w[0] || notices[1].Retry.Delay != w[1]) {
		t.Errorf("notices say waits of %v and %v, the waits were %v", notices[0].Retry.Delay, notices[1].Retry.Delay, w)
	}
	if len(w) != 2 || w[0] < 5*time.Millisecond || w[0] > 10*time.Millisecond || w[1] < 10*time.Millisecond || w[1] > 20*time.Millisecond {
		t.Errorf("waits = %v, want jittered 10ms then 20ms", w)
	}
}

func TestRetryNeverReplaysAReplyThatBegan(t *testing.T) {
	s := &stub{name: "anthropic", results: []stubResult{{events: []llm.Event{{Kind: llm.EventText, Text: "par"}}, err: overloaded}}}
	p := provider.WithRetry(s, provider.RetryPolicy{Attempts: 4, Wait: (&providertest.Waits{}).Wait})
	_, err := p.Stream(context.Background(), llm.Request{}, noEmit)
	if !errors.Is(err, overloaded) || s.calls != 1 {
		t.Errorf("err = %v after %d calls, want the overload after 1", err, s.calls)
	}
	if err.Error() != "anthropic: overloaded (HTTP 529)" {
		t.Errorf("error = %q", err)
	}
}

func TestRetryGivesUpOnAFailureThatWillNotPass(t *testing.T) {
	bad := &llm.ProviderError{Provider: "openai", Status: 401, Message: "invalid API key for openai"}
	s := &stub{name: "openai", results: []stubResult{{err: bad}}}
	p := provider.WithRetry(s, provider.RetryPolicy{Attempts: 4, Wait: (&providertest.Waits{}).Wait})
	_, err := p.Stream(context.Background(), llm.Request{}, noEmit)
	if err != bad || s.calls != 1 {
		t.Errorf("err = %v after %d calls", err, s.calls)
	}
}

func TestRetryStopsWhenTheServiceAsksForTooLongAWait(t *testing.T) {
	limited := &provider.RetryAfterError{Err: &llm.ProviderError{Provider: "anthropic", Status: 429, Message: "rate limited", Retryable: true}, After: time.Hour}
	s := &stub{name: "anthropic", results: []stubResult{{err: limited}}}
	var waits providertest.Waits
	p := provider.WithRetry(s, provider.RetryPolicy{Attempts: 4, MaxDelay: time.Minute, Wait: waits.Wait})
	_, err := p.Stream(context.Background(), llm.Request{}, noEmit)
	want := "anthropic: rate limited (HTTP 429) after 1 attempt; the service asked to wait 1h0m0s"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	if s.calls != 1 || len(waits.All()) != 0 {
		t.Errorf("calls = %d, waits = %v", s.calls, waits.All())
	}
}

// blocking fails retryably once it has told started, so that the retry's
// wait begins.
type blocking struct {
	stub
	started chan struct{}
}

func (b *blocking) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	b.calls++
	if b.calls == 1 {
		close(b.started)
	}
	return llm.Reply{}, overloaded
}

func TestCancellationEndsARetryWaitAtOnce(t *testing.T) {
	b := &blocking{stub: stub{name: "anthropic"}, started: make(chan struct{})}
	// A real timer of an hour: only the cancellation can end the wait.
	p := provider.WithRetry(b, provider.RetryPolicy{Attempts: 4, BaseDelay: time.Hour, MaxDelay: 2 * time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Stream(ctx, llm.Request{}, noEmit)
		done <- err
	}()
	<-b.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if b.calls != 1 {
		t.Errorf("calls = %d, want 1", b.calls)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-3"}, 0, false},
		{nil, 0, false},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		got, ok := provider.ParseRetryAfter(h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%v) = %v, %v; want %v, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestStatusErrorMapsStatusesForPeople(t *testing.T) {
	for _, tc := range []struct {
		status    int
		message   string
		want      string
		retryable bool
	}{
		{401, "invalid x-api-key", "anthropic: invalid API key for anthropic (HTTP 401)", false},
		{400, "messages: at least one message is required", "anthropic: invalid request: messages: at least one message is required (HTTP 400)", false},
		{404, "model: nope", "anthropic: not found: model: nope (HTTP 404)", false},
		{403, "", "anthropic: permission denied (HTTP 403)", false},
		{429, "slow down", "anthropic: rate limited (HTTP 429)", true},
		{529, "Overloaded", "anthropic: overloaded (HTTP 529)", true},
		{500, "boom", "anthropic: internal server error (HTTP 500)", true},
		{503, "", "anthropic: service unavailable (HTTP 503)", true},
		{599, "", "anthropic: server error (HTTP 599)", true},
		{402, "credit balance is too low", "anthropic: payment required: credit balance is too low (HTTP 402)", false},
		{400, "bad api_key=sk-live-abcdefghijklmnop", "anthropic: invalid request: bad api_key=[redacted] (HTTP 400)", false},
	} {
		err := provider.StatusError("anthropic", tc.status, tc.message, nil)
		if err.Error() != tc.want {
			t.Errorf("StatusError(%d, %q) = %q, want %q", tc.status, tc.message, err, tc.want)
		}
		if provider.Retryable(err) != tc.retryable {
			t.Errorf("StatusError(%d) retryable = %v", tc.status, !tc.retryable)
		}
	}
	h := http.Header{"Retry-After": {"3"}}
	err := provider.StatusError("openai", 429, "", h)
	if d, ok := provider.RetryAfter(err); !ok || d != 3*time.Second {
		t.Errorf("retry-after = %v, %v", d, ok)
	}
	if _, ok := provider.RetryAfter(provider.StatusError("openai", 400, "", h)); ok {
		t.Error("a failure that is not retried carries a retry-after")
	}
	long := provider.StatusError("openai", 400, strings.Repeat("é", 400), nil)
	if len(long.Error()) > 400 {
		t.Errorf("service message not bounded: %d bytes", len(long.Error()))
	}
}

func TestTransportErrors(t *testing.T) {
	reset := fmt.Errorf("read tcp: %w", syscall.ECONNRESET)
	err := provider.TransportError("openai", reset)
	if !provider.Retryable(err) || !strings.HasPrefix(err.Error(), "openai: connection failed: ") {
		t.Errorf("reset = %v (retryable %v)", err, provider.Retryable(err))
	}
	if err := provider.TransportError("openai", context.Canceled); err != context.Canceled {
		t.Errorf("cancellation = %v, want it unchanged", err)
	}
	other := provider.TransportError("openai", errors.New("no such host"))
	if provider.Retryable(other) || other.Error() != "openai: request failed: no such host" {
		t.Errorf("other = %v", other)
	}
}
