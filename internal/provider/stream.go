package provider

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/redact"
)

// The providers speak their services' HTTP APIs with net/http and
// encoding/json rather than through the services' SDKs: the two SDKs and
// what they import were four fifths of agentd's executable, and their
// package initialisers ran in every agentd process (each CLI command, the
// host, each worker) whether it called a model or not.

// maxErrorBody bounds the body of a failed answer that is read for its
// message.
const maxErrorBody = 64 << 10

// maxEventLine bounds one line of an event stream (a tool call's
// arguments can arrive as one long delta).
const maxEventLine = 16 << 20

// Post sends body, encoded as JSON, to url with header and returns the
// answer when its status is 2xx; the caller reads and closes its body.
// Any other status becomes StatusError's error, with the message the
// service put in the answer's error.message, secret removed from it. A
// request that got no answer becomes TransportError's error.
func Post(ctx context.Context, client *http.Client, provider, url string, header http.Header, body any, secret string) (*http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, &llm.ProviderError{Provider: provider, Message: "encoding the request: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return nil, TransportError(provider, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, TransportError(provider, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, StatusError(provider, resp.StatusCode, Scrub(ErrorMessage(raw), secret), resp.Header)
}

// maxListBody bounds the body of a listing's answer.
const maxListBody = 8 << 20

// GetJSON asks url with header and decodes its 2xx answer, a JSON object,
// into v. Other statuses and failures to reach the service are mapped as
// Post maps them.
func GetJSON(ctx context.Context, client *http.Client, provider, url string, header http.Header, secret string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return TransportError(provider, err)
	}
	for k, vals := range header {
		req.Header[k] = vals
	}
	req.Header.Set("Accept", "application/json")
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return TransportError(provider, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return StatusError(provider, resp.StatusCode, Scrub(ErrorMessage(raw), secret), resp.Header)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody+1))
	if err != nil {
		return TransportError(provider, err)
	}
	if len(raw) > maxListBody {
		return &llm.ProviderError{Provider: provider, Message: "the service's answer is larger than 8 MiB"}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &llm.ProviderError{Provider: provider, Message: "the service's answer is not the JSON expected: " + err.Error()}
	}
	return nil
}

// KeyDigest returns a short digest of key that tells keys apart without
// giving any away, for a listing's scope; "" for no key.
func KeyDigest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// ErrorMessage returns the error.message of a service's error object, ""
// when data holds none.
func ErrorMessage(data []byte) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil {
		return ""
	}
	return body.Error.Message
}

// Scrub removes secret from a service's words.
func Scrub(msg, secret string) string {
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, redact.Marker)
	}
	return msg
}

// Events reads a text/event-stream (the WHATWG EventSource format): each
// event's name and data, the data lines of one event joined by newlines.
// Comments and fields other than event and data are skipped.
type Events struct {
	sc   *bufio.Scanner
	name string
	data []byte
	err  error
}

// NewEvents returns a reader of the event stream r.
func NewEvents(r io.Reader) *Events {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	return &Events{sc: sc}
}

// Next reads the next event with data, and reports whether there is one.
func (e *Events) Next() bool {
	e.name, e.data = "", e.data[:0]
	hasData := false
	for e.sc.Scan() {
		line := e.sc.Bytes()
		if len(line) == 0 {
			if hasData {
				return true
			}
			e.name = ""
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			e.name = string(value)
		case "data":
			if hasData {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, value...)
			hasData = true
		}
	}
	e.err = e.sc.Err()
	if errors.Is(e.err, bufio.ErrTooLong) {
		e.err = errors.New("an event stream's line is longer than 16 MiB")
	}
	return e.err == nil && hasData
}

// Name returns the current event's name, "" when it had none.
func (e *Events) Name() string { return e.name }

// Data returns the current event's data, valid until the next call of Next.
func (e *Events) Data() []byte { return e.data }

// Err returns the error that ended the stream, nil at its end.
func (e *Events) Err() error { return e.err }
