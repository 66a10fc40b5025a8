package worker

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/protocol"
)

// FuzzRecover feeds a new worker transcripts of well-formed records with
// arbitrary contents, as an edited or damaged file could hold: recovery
// never panics, and the queue it rebuilds holds only queued entries, each
// known by its message, each message once.
func FuzzRecover(f *testing.F) {
	types := []string{protocol.RecordTurnStart, protocol.RecordTurnEnd, protocol.RecordUserMessage, protocol.RecordAssistantMessage, protocol.RecordToolResults, protocol.RecordQueueAdd, protocol.RecordQueueRetract, protocol.RecordToolAllowed,
		protocol.RecordCompaction, protocol.RecordCompactionSetting, protocol.RecordFileChange, protocol.RecordForked, "other"}
	f.Add([]byte{0, 1, 5, 2, 6}, []byte(`{"messageId":"m1","entryId":"q-m1","placement":"next_turn","text":"x","runId":"r","status":"completed"}`))
	f.Add([]byte{5, 5, 6, 0, 3}, []byte(`{"messageId":"m1","placement":"steering","steering":true}`))
	f.Add([]byte{4, 4}, []byte(`{"role":"assistant","parts":[{"type":"tool_call","toolCall":{"id":"c","name":"todo","arguments":{"items":[]}}}]}`))
	f.Add([]byte{2}, []byte(`"not an object"`))
	f.Add([]byte{2, 3, 2, 3, 9, 2, 9}, []byte(`{"text":"x","role":"assistant","parts":[],"summary":"s","messages":2,"kept":1}`))
	f.Add([]byte{9}, []byte(`{"summary":"s","messages":-1}`))
	f.Add([]byte{10}, []byte(`{"compactAt":-3}`))
	f.Add([]byte{10, 11, 12}, []byte(`{"compactAt":50,"path":"/x","fromSessionId":"s0","atSequence":3}`))
	f.Fuzz(func(t *testing.T, kinds, data []byte) {
		if len(kinds) > 64 || !json.Valid(data) {
			return
		}
		log, err := transcript.Open(filepath.Join(t.TempDir(), "transcript.jsonl"), transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		for i, k := range kinds {
			turn := "t" + string(rune('a'+i%3))
			if _, err := log.Append(types[int(k)%len(types)], turn, json.RawMessage(data)); err != nil {
				t.Fatal(err)
			}
		}
		s := &session{
			id: "s1", log: log, todo: &tools.Todo{}, logger: slog.New(slog.DiscardHandler),
			turns: map[string]*turn{}, pending: map[string]*interaction{}, live: protocol.NewProjector(protocol.SessionProjection{}),
			subs: map[string]*subscription{}, messages: map[string]protocol.QueueEntry{}, allowed: map[string]bool{},
		}
		if err := s.recover("worker exited: signal 9"); err != nil {
			t.Fatalf("recover: %v", err)
		}
		if s.compactAt != 0 && (s.compactAt < protocol.MinCompactAt || s.compactAt > protocol.MaxCompactAt) {
			t.Fatalf("a compaction threshold of %d", s.compactAt)
		}
		if len(s.queue.Steering) > 0 {
			t.Fatalf("steering left waiting with no turn to take it: %+v", s.queue.Steering)
		}
		seen := map[string]bool{}
		for _, e := range s.queue.FollowUp {
			if e.State != protocol.QueueQueued || s.messages[e.MessageID].State != protocol.QueueQueued || seen[e.MessageID] {
				t.Fatalf("queue entry %+v, known as %+v", e, s.messages[e.MessageID])
			}
			seen[e.MessageID] = true
		}
	})
}
