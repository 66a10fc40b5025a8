// Package providertest stands in for a model provider's HTTP endpoint in
// tests: a local server that answers each request with the next recorded
// response (a status, headers and a body read from a fixture file, typically
// a stream in the provider's documented server-sent-events format) and
// keeps the requests it received. It also records the events a provider
// emits. It is the only fake the provider tests use: everything between the
// provider and the socket is real.
package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/llm"
)

// Response is one recorded answer.
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is added to the answer. Content-Type defaults to
	// text/event-stream for a 200 and application/json otherwise.
	Header map[string]string
	// File is read from testdata/ of the test's package to make the body.
	File string
	// Body is used when File is empty.
	Body string
	// HangUp closes the connection without answering, as a reset
	// connection would.
	HangUp bool
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the request body into a generic value.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("request body is not a JSON object: %v\n%s", err, r.Body)
	}
	return v
}

// Server answers requests with its responses in order; a request past the
// last one fails the test and gets a 500. A GET of a path ending in
// /models is a listing of models, answered apart (see SetModels) and
// recorded apart (Listings), so that a provider listing its models in the
// background takes nothing from the recorded responses.
type Server struct {
	*httptest.Server
	t         testing.TB
	transport *http.Transport

	mu        sync.Mutex
	responses []Response // guarded by mu
	requests  []Request  // guarded by mu
	models    []Model    // guarded by mu; nil answers listings with a 404
	pageSize  int        // guarded by mu; 0 lists every model on one page
	listings  []Request  // guarded by mu
}

// Model is a model a Server lists.
type Model struct {
	ID string
	// MaxInputTokens is the context window Anthropic's listing gives;
	// 0 leaves it out.
	MaxInputTokens int
}

// SetModels makes the server list models, pageSize to a page (0: all on
// one), in the form both Anthropic's Models API (data, has_more,
// first_id, last_id, paged by after_id) and OpenAI's (object "list",
// data) answer.
func (s *Server) SetModels(pageSize int, models ...Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models, s.pageSize = models, pageSize
	if s.models == nil {
		s.models = []Model{}
	}
}

// Listings returns the listings of models asked for so far.
func (s *Server) Listings() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.listings...)
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.listings = append(s.listings, Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone()})
	models, size := s.models, s.pageSize
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if models == nil {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"no models here"}}`)
		return
	}
	start := 0
	if after := r.URL.Query().Get("after_id"); after != "" {
		for i, m := range models {
			if m.ID == after {
				start = i + 1
			}
		}
	}
	end := len(models)
	if size > 0 {
		end = min(start+size, len(models))
	}
	type entry struct {
		ID             string `json:"id"`
		Type           string `json:"type"`
		Object         string `json:"object"`
		DisplayName    string `json:"display_name"`
		MaxInputTokens int    `json:"max_input_tokens,omitempty"`
		OwnedBy        string `json:"owned_by"`
	}
	page := struct {
		Object  string  `json:"object"`
		Data    []entry `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID string  `json:"first_id,omitempty"`
		LastID  string  `json:"last_id,omitempty"`
	}{Object: "list", Data: []entry{}, HasMore: end < len(models)}
	for _, m := range models[start:end] {
		page.Data = append(page.Data, entry{ID: m.ID, Type: "model", Object: "model", DisplayName: m.ID, MaxInputTokens: m.MaxInputTokens, OwnedBy: "system"})
	}
	if len(page.Data) > 0 {
		page.FirstID, page.LastID = page.Data[0].ID, page.Data[len(page.Data)-1].ID
	}
	json.NewEncoder(w).Encode(page)
}

// NewServer starts a server that plays responses. It is closed when the
// test ends.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := &Server{t: t, responses: responses, transport: &http.Transport{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.transport.CloseIdleConnections()
		s.Server.Close()
	})
	return s
}

// HTTPClient returns a client of its own for the provider under test, whose
// idle connections are closed with the server.
func (s *Server) HTTPClient() *http.Client {
	return &http.Client{Transport: s.transport}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		s.serveModels(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	n := len(s.requests)
	var resp Response
	ok := len(s.responses) > 0
	if ok {
		resp = s.responses[0]
		s.responses = s.responses[1:]
	}
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("request %d to %s: no response left to play", n, r.URL.Path)
		http.Error(w, `{"error":{"type":"api_error","message":"no response left"}}`, http.StatusInternalServerError)
		return
	}
	if resp.HangUp {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	data := []byte(resp.Body)
	if resp.File != "" {
		var err error
		data, err = os.ReadFile(filepath.Join("testdata", resp.File))
		if err != nil {
			s.t.Errorf("fixture: %v", err)
			http.Error(w, "missing fixture", http.StatusInternalServerError)
			return
		}
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if status == http.StatusOK {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	// Write the stream an event at a time, so that the client reads it as
	// it would read a live one.
	for chunk := range bytes.SplitAfterSeq(data, []byte("\n\n")) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// Recorder collects the events a provider emits.
type Recorder struct {
	mu     sync.Mutex
	events []llm.Event // guarded by mu
}

// Emit records ev; pass it as Stream's emit.
func (r *Recorder) Emit(ev llm.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.ToolCall != nil {
		c := *ev.ToolCall
		ev.ToolCall = &c
	}
	r.events = append(r.events, ev)
	return nil
}

// Events returns the events recorded so far.
func (r *Recorder) Events() []llm.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]llm.Event(nil), r.events...)
}

// Waits records the waits of a retry policy without sleeping; pass its
// Wait as the policy's.
type Waits struct {
	mu    sync.Mutex
	waits []time.Duration // guarded by mu
}

// Wait records d and returns at once, or returns ctx's error when it has
// ended.
func (w *Waits) Wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.waits = append(w.waits, d)
	w.mu.Unlock()
	return ctx.Err()
}

// All returns the waits recorded so far.
func (w *Waits) All() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.waits...)
}
