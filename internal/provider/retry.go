package provider

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/agentd-dev/agentd/internal/llm"
)

// RetryPolicy says how WithRetry retries a failed call.
type RetryPolicy struct {
	// Attempts is the most calls made, the first included: 4 means up to
	// three retries. Below 1 counts as 1.
	Attempts int
	// BaseDelay is the backoff before the first retry; it doubles for each
	// retry after, up to MaxDelay, and is jittered to between half and all
	// of itself.
	BaseDelay time.Duration
	// MaxDelay bounds a backoff. A retry-after longer than MaxDelay ends the
	// retries at once: waiting that long is not worth a turn.
	MaxDelay time.Duration
	// Budget bounds the waits of one call together: a wait that would take
	// them past it ends the retries at once. 0 means no bound but
	// Attempts.
	Budget time.Duration
	// Wait sleeps for d, or until ctx ends (returning its error), whichever
	// comes first. Nil means a timer; tests pass one that records.
	Wait func(ctx context.Context, d time.Duration) error
	// Logger, when set, records each retry.
	Logger *slog.Logger
}

// DefaultRetryPolicy is the policy for remote providers: up to six
// attempts, backoff from two seconds (2, 4, 8, 16, 32 seconds, each
// jittered to between half and all of itself), a retry-after of at most a
// minute honoured, and at most two minutes of waiting in all.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Attempts: 6, BaseDelay: 2 * time.Second, MaxDelay: time.Minute, Budget: 2 * time.Minute}
}

// RetryError is the failure of a call WithRetry tried more than once, or
// gave up on because the service asked for too long a wait. It unwraps to
// the last attempt's failure.
type RetryError struct {
	// Attempts is the number of calls made.
	Attempts int
	// Err is the last attempt's failure.
	Err error
	// Wait is the wait that ended the retries: a retry-after too long, or
	// one past Budget; zero when the attempts ran out.
	Wait time.Duration
	// Budget is set when Wait would have taken the waits past it.
	Budget time.Duration
}

func (e *RetryError) Error() string {
	noun := "attempts"
	if e.Attempts == 1 {
		noun = "attempt"
	}
	msg := fmt.Sprintf("%v after %d %s", e.Err, e.Attempts, noun)
	switch {
	case e.Budget > 0:
		msg += fmt.Sprintf("; waiting %v more would pass the retry budget of %v", e.Wait.Round(time.Second), e.Budget)
	case e.Wait > 0:
		msg += fmt.Sprintf("; the service asked to wait %v", e.Wait.Round(time.Second))
	}
	return msg
}

// Unwrap returns the last attempt's failure.
func (e *RetryError) Unwrap() error { return e.Err }

// WithRetry returns p calling its service again when a Stream fails with a
// retryable *llm.ProviderError before any event was emitted: a reply that
// has begun reaching the caller is never replayed. It waits between
// attempts with exponential backoff and jitter, or for the retry-after the
// failure carries, within the policy's budget, and stops at once when ctx
// ends (returning ctx's error). Before each wait it emits an
// llm.EventRetry saying how long it waits and why, so that a person sees
// the call is not stuck.
// A failure after more than one attempt is a *RetryError naming the count;
// a first failure that is not retryable (a 401) is returned as it is.
//
// The returned provider keeps p's Configurable, AnyModel and KeySourcer
// answers.
func WithRetry(p llm.Provider, policy RetryPolicy) llm.Provider {
	if policy.Attempts < 1 {
		policy.Attempts = 1
	}
	if policy.Wait == nil {
		policy.Wait = Sleep
	}
	return &retrying{inner: p, policy: policy}
}

// retrying is constant after construction.
type retrying struct {
	inner  llm.Provider
	policy RetryPolicy
}

func (r *retrying) Name() string     { return r.inner.Name() }
func (r *retrying) Models() []string { return r.inner.Models() }

// Configured reports whether the wrapped provider is configured.
func (r *retrying) Configured() bool { return configured(r.inner) }

// ConfigEnv names the wrapped provider's environment variable.
func (r *retrying) ConfigEnv() string {
	if c, ok := r.inner.(Configurable); ok {
		return c.ConfigEnv()
	}
	return ""
}

// AnyModel reports whether the wrapped provider serves models it does not
// list.
func (r *retrying) AnyModel() bool { return anyModel(r.inner) }

// KeySource says where the wrapped provider's key comes from.
func (r *retrying) KeySource() string {
	if k, ok := r.inner.(KeySourcer); ok {
		return k.KeySource()
	}
	return ""
}

// ListingScope names whom the wrapped provider's listing is for.
func (r *retrying) ListingScope() string { return listingScope(r.inner) }

// ListModels lists the wrapped provider's models, without retrying: a
// listing that fails is asked for again later.
func (r *retrying) ListModels(ctx context.Context) ([]ListedModel, error) {
	return listModels(ctx, r.inner)
}

// Describe returns what the wrapped provider knows of model.
func (r *retrying) Describe(model string) llm.ModelInfo { return llm.Describe(r.inner, model) }

func (r *retrying) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	emitted := false
	track := func(ev llm.Event) error {
		emitted = true
		return emit(ev)
	}
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		reply, err := r.inner.Stream(ctx, req, track)
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return reply, ctx.Err()
		}
		if emitted || !Retryable(err) {
			return reply, wrapAttempts(err, attempt, 0)
		}
		if attempt >= r.policy.Attempts {
			return reply, wrapAttempts(err, attempt, 0)
		}
		delay := r.backoff(attempt)
		if after, ok := RetryAfter(err); ok {
			if r.policy.MaxDelay > 0 && after > r.policy.MaxDelay {
				return reply, &RetryError{Attempts: attempt, Err: err, Wait: after}
			}
			delay = after
		}
		if r.policy.Budget > 0 && waited+delay > r.policy.Budget {
			return reply, &RetryError{Attempts: attempt, Err: err, Wait: delay, Budget: r.policy.Budget}
		}
		waited += delay
		if r.policy.Logger != nil {
			r.policy.Logger.Warn("model call failed; retrying",
				"provider", r.inner.Name(), "attempt", attempt, "delay", delay, "err", err)
		}
		notice := llm.Event{Kind: llm.EventRetry, Retry: &llm.Retry{Attempt: attempt, MaxAttempts: r.policy.Attempts, Delay: delay, Reason: err.Error()}}
		if err := emit(notice); err != nil {
			return llm.Reply{}, err
		}
		if err := r.policy.Wait(ctx, delay); err != nil {
			return llm.Reply{}, err
		}
	}
}

// backoff is the jittered wait before retry number attempt (1 for the
// first retry).
func (r *retrying) backoff(attempt int) time.Duration {
	d := r.policy.BaseDelay
	for i := 1; i < attempt && (r.policy.MaxDelay <= 0 || d < r.policy.MaxDelay); i++ {
		d *= 2
	}
	if r.policy.MaxDelay > 0 && d > r.policy.MaxDelay {
		d = r.policy.MaxDelay
	}
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

func wrapAttempts(err error, attempts int, wait time.Duration) error {
	if attempts <= 1 && wait == 0 {
		return err
	}
	return &RetryError{Attempts: attempts, Err: err, Wait: wait}
}

// Sleep waits for d, or until ctx ends, returning ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
