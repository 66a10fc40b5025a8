package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentd-dev/agentd/protocol"
)

// diskTurn is a turn as a transcript records it.
type diskTurn struct {
	starts, ends     int
	startAt, endAt   int // the lines of its first start and first end
	status, endCause string
}

// sessionCheck is what one check of one transcript counted.
type sessionCheck struct {
	records, torn                  int
	completed, failed, interrupted int
	acked                          int
}

// check reads every session's transcript from disk, with every session
// parked, and checks it against what the session's client saw.
func (s *Soak) check(when string, final bool) {
	s.trackRegistered()
	var sum sessionCheck
	longest := s.Report().LongestResume
	for _, r := range s.runs() {
		v := r.view()
		c := s.checkSession(when, r.id, v)
		sum.records += c.records
		sum.torn += c.torn
		sum.completed += c.completed
		sum.failed += c.failed
		sum.interrupted += c.interrupted
		sum.acked += c.acked
		longest = max(longest, v.longest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Checks++
	s.report.LongestResume = longest
	s.report.Lost, s.report.Duplicated = len(s.lost), len(s.dup)
	s.report.Records, s.report.TornTails = sum.records, sum.torn
	s.report.Turns, s.report.Completed, s.report.Failed, s.report.Interrupted = sum.acked, sum.completed, sum.failed, sum.interrupted
}

// checkSession checks session id's transcript: each line a record, the
// sequences from 1 without a gap or a repeat, every record the client
// received there as received, every turn whose start was acknowledged
// recorded, every turn started and ended once and as its client saw it
// end, failed or interrupted only when a fault hit it, and the first turn
// begun after each fault completed.
func (s *Soak) checkSession(when, id string, v view) sessionCheck {
	var c sessionCheck
	fail := func(format string, args ...any) {
		s.fail("%s: session %s: %s", when, id, fmt.Sprintf(format, args...))
	}
	path := filepath.Join(s.home, "sessions", id, "transcript.jsonl")
	torn, _ := filepath.Glob(path + ".damaged-*")
	c.torn = len(torn)
	raw, err := os.ReadFile(path)
	if err != nil {
		fail("reading its transcript: %v", err)
		return c
	}
	bySeq := map[uint64]protocol.TranscriptRecord{}
	turns := map[string]*diskTurn{}
	next := uint64(1)
	for i, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		n := i + 1
		var rec protocol.TranscriptRecord
		if !bytes.HasSuffix(line, []byte("\n")) {
			fail("line %d is cut short: %.80q", n, line)
			continue
		}
		if err := json.Unmarshal(line, &rec); err != nil || rec.Seq == 0 || rec.Type == "" {
			fail("line %d is not a transcript record (%v): %.80q", n, err, line)
			continue
		}
		c.records++
		switch {
		case rec.Seq < next:
			s.duplicated(fmt.Sprintf("session %s record %d", id, rec.Seq))
			fail("line %d repeats sequence %d", n, rec.Seq)
		case rec.Seq > next:
			for q := next; q < rec.Seq; q++ {
				s.lose(fmt.Sprintf("session %s record %d", id, q))
			}
			fail("line %d has sequence %d, after %d", n, rec.Seq, next-1)
		}
		next = max(next, rec.Seq+1)
		if _, ok := bySeq[rec.Seq]; !ok {
			bySeq[rec.Seq] = rec
		}
		if rec.Type != protocol.RecordTurnStart && rec.Type != protocol.RecordTurnEnd {
			continue
		}
		t := turns[rec.TurnID]
		if t == nil {
			t = &diskTurn{}
			turns[rec.TurnID] = t
		}
		if rec.Type == protocol.RecordTurnStart {
			if t.starts++; t.starts == 1 {
				t.startAt = n
			}
			continue
		}
		if t.ends++; t.ends == 1 {
			var d protocol.TurnEndData
			json.Unmarshal(rec.Data, &d)
			t.endAt, t.status, t.endCause = n, d.Status, d.Error
		}
	}

	for turn, t := range turns {
		if t.starts > 1 {
			s.duplicated(fmt.Sprintf("session %s turn %s start", id, turn))
			fail("turn %s starts %d times", turn, t.starts)
		}
		if t.ends > 1 {
			s.duplicated(fmt.Sprintf("session %s turn %s end", id, turn))
			fail("turn %s ends %d times", turn, t.ends)
		}
		switch {
		case t.starts == 0:
			fail("turn %s ends, line %d, without a start", turn, t.endAt)
		case t.ends == 0:
			fail("turn %s, started line %d, has no end while the session is idle", turn, t.startAt)
		case t.endAt < t.startAt:
			fail("turn %s ends, line %d, before it starts, line %d", turn, t.endAt, t.startAt)
		}
		switch t.status {
		case protocol.TurnCompleted:
			c.completed++
		case protocol.TurnFailed:
			c.failed++
		case protocol.TurnInterrupted:
			c.interrupted++
		}
	}
	c.acked = len(v.acked)
	for _, turn := range v.acked {
		if t := turns[turn]; t == nil || t.starts == 0 {
			s.lose(fmt.Sprintf("session %s turn %s start", id, turn))
			fail("turn %s, whose start was acknowledged, is not recorded", turn)
		}
	}
	for seq, got := range v.seen {
		rec, ok := bySeq[seq]
		switch {
		case !ok:
			s.lose(fmt.Sprintf("session %s record %d", id, seq))
			fail("record %d (%s of turn %q), which a client received, is not on disk", seq, got.typ, got.turn)
		case rec.Type != got.typ || rec.TurnID != got.turn:
			s.lose(fmt.Sprintf("session %s record %d", id, seq))
			fail("record %d is %s of turn %q on disk, but a client received %s of turn %q", seq, rec.Type, rec.TurnID, got.typ, got.turn)
		}
	}
	for _, msg := range v.repeated {
		fail("the stream brought a record twice: %s", msg)
	}

	for _, run := range v.turns {
		if t := turns[run.id]; t != nil && t.status != run.status {
			fail("turn %s ended %s as its client saw it, %s on disk", run.id, run.status, t.status)
		}
		switch run.status {
		case protocol.TurnCompleted:
		case protocol.TurnFailed, protocol.TurnInterrupted:
			if len(s.faultsDuring(id, run.began, run.ended)) == 0 {
				fail("turn %s ended %s (%s) with no fault during it", run.id, run.status, run.cause)
			}
		default:
			fail("turn %s ended %s (%s)", run.id, run.status, run.cause)
		}
	}
	s.mu.Lock()
	faults := append([]fault(nil), s.faults...)
	s.mu.Unlock()
	for i, f := range faults {
		for _, run := range v.turns {
			if run.began.After(f.done) {
				if run.status != protocol.TurnCompleted {
					fail("turn %s, the first begun after fault %d (%s), ended %s (%s)", run.id, i+1, f.kind, run.status, run.cause)
				}
				break
			}
		}
	}
	return c
}

// lose counts what went missing, once however often it is found.
func (s *Soak) lose(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[what] = true
}

// duplicated counts what was there twice, once however often it is found.
func (s *Soak) duplicated(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dup[what] = true
}
