package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/redact"
)

// Errors of resolving a "provider/model" spec. The errors returned are the
// typed errors below; each matches its sentinel with errors.Is.
var (
	// ErrUnknownProvider is returned when a spec names no registered provider.
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrModelRequired is returned when a spec names a provider but no model.
	ErrModelRequired = errors.New("provider requires a model")
	// ErrNotConfigured is returned when a spec names a provider that lacks
	// its configuration (an API key).
	ErrNotConfigured = errors.New("provider is not configured")
	// ErrUnknownModel is returned when a spec names a model its provider
	// does not list and the provider serves only the models it lists.
	ErrUnknownModel = errors.New("unknown model")
)

// UnknownProviderError is returned when a spec names no registered provider.
type UnknownProviderError struct {
	// Name is the provider the spec named; empty when it named none.
	Name string
	// Known are the registered providers.
	Known []string
}

func (e *UnknownProviderError) Error() string {
	known := "none are registered"
	if len(e.Known) > 0 {
		known = "known providers: " + strings.Join(e.Known, ", ")
	}
	if e.Name == "" {
		return fmt.Sprintf("no provider given: write provider/model (%s)", known)
	}
	return fmt.Sprintf("unknown provider %q (%s)", e.Name, known)
}

// Is reports whether target is ErrUnknownProvider.
func (e *UnknownProviderError) Is(target error) bool { return target == ErrUnknownProvider }

// ModelRequiredError is returned when a spec names a provider but no model.
type ModelRequiredError struct {
	Provider string
	// Models are the provider's known models, for the hint.
	Models []string
}

func (e *ModelRequiredError) Error() string {
	msg := fmt.Sprintf("provider requires a model: write %s/<model>", e.Provider)
	if len(e.Models) > 0 {
		msg += fmt.Sprintf(", for example %s/%s", e.Provider, e.Models[0])
	}
	return msg
}

// Is reports whether target is ErrModelRequired.
func (e *ModelRequiredError) Is(target error) bool { return target == ErrModelRequired }

// NotConfiguredError is returned when a spec names a provider that lacks its
// configuration.
type NotConfiguredError struct {
	Provider string
	// Env is the environment variable to set.
	Env string
}

func (e *NotConfiguredError) Error() string {
	if e.Env == "" {
		return fmt.Sprintf("%s is not configured", e.Provider)
	}
	return fmt.Sprintf("%s is not configured: set %s", e.Provider, e.Env)
}

// Is reports whether target is ErrNotConfigured.
func (e *NotConfiguredError) Is(target error) bool { return target == ErrNotConfigured }

// UnknownModelError is returned when a spec names a model its provider does
// not list, and the provider serves only those it lists.
type UnknownModelError struct {
	Provider string
	Model    string
	// Models are the provider's models.
	Models []string
	// Nearest are the provider's models nearest to Model, nearest first;
	// empty when none is near.
	Nearest []string
}

// maxNamed bounds the models an UnknownModelError names when none is near.
const maxNamed = 8

func (e *UnknownModelError) Error() string {
	if len(e.Nearest) > 0 {
		return fmt.Sprintf("%s has no model %q; did you mean %s?", e.Provider, e.Model, strings.Join(e.Nearest, ", "))
	}
	models := e.Models
	more := ""
	if len(models) > maxNamed {
		models, more = models[:maxNamed], fmt.Sprintf(" and %d more", len(e.Models)-maxNamed)
	}
	return fmt.Sprintf("%s has no model %q (its models: %s%s)", e.Provider, e.Model, strings.Join(models, ", "), more)
}

// Is reports whether target is ErrUnknownModel.
func (e *UnknownModelError) Is(target error) bool { return target == ErrUnknownModel }

// RetryAfterError is a provider failure that carries how long the service
// asked callers to wait before trying again (an HTTP retry-after). It
// unwraps to the *llm.ProviderError.
type RetryAfterError struct {
	Err   *llm.ProviderError
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }

// Unwrap returns the provider error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns the wait a failure's service asked for, and whether it
// asked for one.
func RetryAfter(err error) (time.Duration, bool) {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return ra.After, true
	}
	return 0, false
}

// Retryable reports whether err is a provider failure the same request may
// get past later (rate limits, overload, server and connection errors).
func Retryable(err error) bool {
	var pe *llm.ProviderError
	return errors.As(err, &pe) && pe.Retryable
}

// StatusOverloaded is the status Anthropic's API answers when it is
// overloaded.
const StatusOverloaded = 529

// RetryableStatus reports whether a request answered with status may
// succeed later: 408, 409, 429, 529 and every 5xx.
func RetryableStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests, StatusOverloaded:
		return true
	}
	return status >= 500 && status <= 599
}

// maxServiceMessage bounds the service's own words carried in an error.
const maxServiceMessage = 300

// StatusError maps a service's HTTP failure to an *llm.ProviderError,
// wrapped in a *RetryAfterError when the failure is retryable and header
// carries a retry-after. message is the service's own explanation; it is
// kept for failures a person must act on (a bad request, a missing model)
// and dropped for the retryable ones, whose status says enough. It is
// redacted and bounded; the caller removes its own key from it first.
//
// 401 reads "invalid API key for <provider>"; 408, 409, 429, 529 and every
// 5xx are retryable.
func StatusError(provider string, status int, message string, header http.Header) error {
	message = cleanMessage(message)
	withDetail := func(s string) string {
		if message == "" {
			return s
		}
		return s + ": " + message
	}
	pe := &llm.ProviderError{Provider: provider, Status: status}
	switch {
	case status == http.StatusUnauthorized:
		pe.Message = "invalid API key for " + provider
	case status == http.StatusForbidden:
		pe.Message = withDetail("permission denied")
	case status == http.StatusNotFound:
		pe.Message = withDetail("not found")
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		pe.Message = withDetail("invalid request")
	case status == http.StatusRequestEntityTooLarge:
		pe.Message = withDetail("request too large")
	case status == http.StatusRequestTimeout:
		pe.Message, pe.Retryable = "request timeout", true
	case status == http.StatusConflict:
		pe.Message, pe.Retryable = "conflict", true
	case status == http.StatusTooManyRequests:
		pe.Message, pe.Retryable = "rate limited", true
	case status == StatusOverloaded:
		pe.Message, pe.Retryable = "overloaded", true
	case status >= 500 && status <= 599:
		pe.Message, pe.Retryable = "server error", true
		if text := http.StatusText(status); text != "" {
			pe.Message = strings.ToLower(text)
		}
	default:
		text := strings.ToLower(http.StatusText(status))
		if text == "" {
			text = "unexpected answer"
		}
		pe.Message = withDetail(text)
	}
	if pe.Retryable {
		if d, ok := ParseRetryAfter(header, time.Now()); ok {
			return &RetryAfterError{Err: pe, After: d}
		}
	}
	return pe
}

// TransportError maps a failure to reach a provider's service (no HTTP
// answer) to an *llm.ProviderError. Connection resets, refusals, broken
// pipes, timeouts and early ends of the body are retryable; other failures
// (an unknown host, a malformed URL) are not. A context's error is
// returned unchanged: a cancelled call is not a provider failure.
func TransportError(provider string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		return err
	}
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	detail := cleanMessage(inner.Error())
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.As(err, &ne) && ne.Timeout():
		return &llm.ProviderError{Provider: provider, Message: "connection failed: " + detail, Retryable: true}
	}
	return &llm.ProviderError{Provider: provider, Message: "request failed: " + detail}
}

// ParseRetryAfter reads the wait a response asks for: retry-after-ms
// (milliseconds), else retry-after in seconds or as an HTTP date (relative
// to now). A date in the past is a wait of zero.
func ParseRetryAfter(header http.Header, now time.Time) (time.Duration, bool) {
	if header == nil {
		return 0, false
	}
	if v := strings.TrimSpace(header.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || s > 1e9 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// cleanMessage makes a service's words fit for an error a person reads:
// secrets redacted, whitespace folded, length bounded.
func cleanMessage(s string) string {
	s = strings.Join(strings.Fields(redact.String(s)), " ")
	if len(s) > maxServiceMessage {
		cut := maxServiceMessage
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
