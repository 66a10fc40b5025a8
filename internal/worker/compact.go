package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentd-dev/agentd/internal/agent"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/protocol"
)

// Context compaction. Before each model call of a turn the worker
// estimates the request's tokens: the last reply's reported usage (its
// prompt and its output) plus a quarter of the bytes of the messages added
// since, or, with no usage to go on (a new worker, a compaction since), a
// quarter of the request's bytes; once a provider has counted, a quarter
// of the bytes is scaled by how its count compared with that estimate.
// Past the session's threshold share of the model's window it compacts
// first: the session's model summarizes the older part of the
// conversation, the summary is recorded (a compaction record; the
// records it summarizes stay), and the model is sent the summary and the
// recent messages from then on. A compaction that fails changes nothing:
// the request goes as it was, and every subscriber is told why.

// thresholdLocked returns the share of the window, in percent, past which
// a request is compacted first.
func (s *session) thresholdLocked() int {
	switch {
	case s.compactAt != 0:
		return s.compactAt
	case s.defaultCompactAt != 0:
		return s.defaultCompactAt
	}
	return protocol.DefaultCompactAt
}

// estimateLocked estimates the tokens of a request of the session's
// conversation with fixed bytes of system prompt and tools.
func (s *session) estimateLocked(fixed int) int {
	if s.usageAt > 0 && s.usageAt <= len(s.history) {
		return s.usageTokens + s.bytesToTokensLocked(agent.ByteSize(s.history[s.usageAt:]))
	}
	return s.bytesToTokensLocked(fixed + agent.ByteSize(s.history))
}

// bytesToTokensLocked estimates the tokens of n bytes: a quarter of them,
// scaled by how the provider's last count compared with that estimate.
func (s *session) bytesToTokensLocked(n int) int {
	tokens := n / agent.BytesPerToken
	if s.tokenRatio > 0 {
		tokens = int(float64(tokens) * s.tokenRatio)
	}
	return tokens
}

// noteUsageLocked remembers a reply's usage as the measure of the
// conversation up to and including that reply, which is committed next,
// and how it compares with the bytes of the request and the reply.
func (s *session) noteUsageLocked(u llm.Usage, reply *llm.Message) {
	if u.IsZero() || reply == nil {
		return
	}
	s.usageTokens = u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens
	s.usageAt = len(s.history) + 1
	if s.lastFixed > 0 {
		estimate := (s.lastFixed + agent.ByteSize(s.history) + agent.ByteSize([]llm.Message{*reply})) / agent.BytesPerToken
		if estimate > 0 {
			s.tokenRatio = min(max(float64(s.usageTokens)/float64(estimate), 0.25), 4)
		}
	}
}

// autoCompact is a turn's agent.Loop.Compact: it compacts the
// conversation when req would pass the threshold.
func (s *session) autoCompact(ctx context.Context, t *turn, prov llm.Provider, req llm.Request) []llm.Message {
	info := llm.Describe(prov, req.Model)
	fixed := agent.FixedBytes(req.System, req.Tools)
	s.mu.Lock()
	s.lastFixed = fixed
	t.window = info.ContextWindow
	before := s.estimateLocked(fixed)
	bound := info.ContextWindow * s.thresholdLocked() / 100
	s.mu.Unlock()
	if before <= bound {
		return nil
	}
	c := compaction{
		turn: t, prov: prov, model: req.Model, window: info.ContextWindow, bound: bound,
		trigger: protocol.CompactionAuto, fixed: fixed, before: before,
	}
	_, history, err := s.compact(ctx, c)
	if err != nil {
		return nil
	}
	return history
}

// compaction is one compaction's parameters.
type compaction struct {
	turn    *turn // the turn it runs in; nil for one asked for between turns
	prov    llm.Provider
	model   string
	window  int
	bound   int
	trigger string
	keep    int
	fixed   int
	before  int
}

// errCompactionRecord fails a compaction whose record cannot be written.
var errCompactionRecord = errors.New("the compaction cannot be recorded")

// compact summarizes the older part of the conversation and records it.
// On failure the session is as it was, and subscribers are told why.
func (s *session) compact(ctx context.Context, c compaction) (protocol.CompactResult, []llm.Message, error) {
	turnID := ""
	if c.turn != nil {
		turnID = c.turn.snap.TurnID
	}
	info := protocol.CompactionInfo{State: protocol.CompactionStarted, Trigger: c.trigger, TokensBefore: c.before, ContextWindow: c.window}
	s.mu.Lock()
	history := slices.Clone(s.history)
	s.mu.Unlock()
	// What is kept takes at most a quarter of the window, and leaves room
	// under the bound for the system prompt, the tools and the summary.
	budget := min(c.window/4, c.bound-c.fixed/agent.BytesPerToken-agent.SummaryReserve)
	cut, cutErr := agent.CutPoint(history, c.keep, max(budget, 0)*agent.BytesPerToken)
	if cutErr != nil && c.trigger == protocol.CompactionAuto {
		// Nothing to summarize: what the request holds is the request
		// being answered, and what no compaction can shrink.
		s.logger.Debug("a request past the compaction threshold has nothing to compact", "tokens", c.before, "bound", c.bound)
		return protocol.CompactResult{}, nil, cutErr
	}
	s.mu.Lock()
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventCompaction, TurnID: turnID, Compaction: ptr(info)})
	s.mu.Unlock()

	fail := func(err error) (protocol.CompactResult, []llm.Message, error) {
		s.logger.Warn("compaction failed; the session is as it was", "trigger", c.trigger, "err", err)
		info.State, info.Error = protocol.CompactionFailed, err.Error()
		s.mu.Lock()
		s.emitLocked(protocol.SessionDelta{Event: protocol.EventCompaction, TurnID: turnID, Compaction: ptr(info)})
		s.mu.Unlock()
		return protocol.CompactResult{}, nil, err
	}
	if cutErr != nil {
		return fail(cutErr)
	}
	summary, usage, err := agent.Summarize(ctx, c.prov, c.model, history[:cut], c.window)
	if c.turn != nil && (!usage.IsZero() || usage.Priced) {
		s.mu.Lock()
		c.turn.calls++
		c.turn.usage = c.turn.usage.Add(usage)
		c.turn.snap.Usage = c.turn.usageLocked()
		s.mu.Unlock()
	}
	if err != nil {
		return fail(fmt.Errorf("the model could not summarize: %w", err))
	}
	compacted := agent.Compacted(history, cut, summary)
	s.mu.Lock()
	after := s.bytesToTokensLocked(c.fixed + agent.ByteSize(compacted))
	s.mu.Unlock()
	data := protocol.CompactionData{
		Summary: summary, Messages: cut, Kept: len(history) - cut, Trigger: c.trigger,
		ContextWindow: c.window, TokensBefore: c.before, TokensAfter: after, Usage: turnUsage(1, usage),
	}
	s.mu.Lock()
	data.Model = s.header.Model
	rec, err := s.appendLocked(protocol.RecordCompaction, turnID, data)
	if err != nil {
		s.mu.Unlock()
		return fail(fmt.Errorf("%w: %v", errCompactionRecord, err))
	}
	// Only this turn (or, between turns, nothing) adds to the
	// conversation while the model summarizes: what it added stays.
	s.history = append(compacted, s.history[len(history):]...)
	s.usageAt = 0
	info.State, info.TokensAfter = protocol.CompactionFinished, after
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventCompaction, TurnID: turnID, Compaction: ptr(info)})
	out := slices.Clone(s.history)
	s.mu.Unlock()
	return protocol.CompactResult{SessionID: s.id, Sequence: rec.Seq, Compaction: data}, out, nil
}

// compactNow is session.compact: a compaction a person asked for, between
// turns. Turns wait for it: a message submitted meanwhile is queued.
func (s *session) compactNow(ctx context.Context, _ *server.Call, in *protocol.CompactInput) (_ protocol.CompactResult, err error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.CompactResult{}, err
	}
	defer s.syncAfter(&err)
	s.mu.Lock()
	switch {
	case s.current != nil:
		s.mu.Unlock()
		return protocol.CompactResult{}, protocol.Errorf(protocol.CodeOperationConflict,
			"turn %s is running; compact once it ends (a turn compacts by itself before a request that would pass %d%% of the model's window)", s.current.snap.TurnID, s.thresholdLocked())
	case s.compacting:
		s.mu.Unlock()
		return protocol.CompactResult{}, protocol.Errorf(protocol.CodeOperationConflict, "the session is compacting already")
	}
	prov, model, rerr := s.providers.Resolve(s.header.Model)
	if rerr != nil {
		s.mu.Unlock()
		return protocol.CompactResult{}, protocol.Errorf(protocol.CodeOperationUnavailable, "cannot compact: %v", rerr)
	}
	s.compacting = true
	info := llm.Describe(prov, model)
	fixed := agent.FixedBytes(s.system, s.toolSpecs())
	c := compaction{
		prov: prov, model: model, window: info.ContextWindow, bound: info.ContextWindow * s.thresholdLocked() / 100,
		trigger: protocol.CompactionManual, keep: in.Keep, fixed: fixed, before: s.estimateLocked(fixed),
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.compacting = false
		s.startQueuedLocked()
		s.mu.Unlock()
	}()
	res, _, cerr := s.compact(ctx, c)
	switch {
	case errors.Is(cerr, agent.ErrNothingToCompact):
		return res, protocol.Errorf(protocol.CodeOperationConflict, "nothing to compact: %v", cerr)
	case errors.Is(cerr, errCompactionRecord):
		return res, s.transcriptFailure(cerr)
	case cerr != nil:
		return res, protocol.Errorf(protocol.CodeOperationUnavailable, "the compaction failed and the session is as it was: %v", cerr)
	}
	return res, nil
}

// toolSpecs returns the specifications of the session's tools.
func (s *session) toolSpecs() []llm.ToolSpec {
	set, err := tools.NewSet(s.tools...)
	if err != nil {
		return nil
	}
	return set.Specs()
}

// setCompaction is session.compaction.set.
func (s *session) setCompaction(_ context.Context, _ *server.Call, in *protocol.CompactionSetInput) (_ protocol.CompactionSetting, err error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.CompactionSetting{}, err
	}
	defer s.syncAfter(&err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.appendLocked(protocol.RecordCompactionSetting, "", protocol.CompactionSettingData{CompactAt: in.CompactAt}); err != nil {
		return protocol.CompactionSetting{}, s.transcriptFailure(err)
	}
	s.compactAt = in.CompactAt
	out := protocol.CompactionSetting{SessionID: s.id, CompactAt: s.thresholdLocked()}
	if prov, model, err := s.providers.Resolve(s.header.Model); err == nil {
		out.ContextWindow = llm.Describe(prov, model).ContextWindow
	}
	return out, nil
}
