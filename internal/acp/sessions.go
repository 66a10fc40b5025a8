package acp

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// listPage bounds the sessions of the host one session/list page reads.
const listPage = 100

// Config option ids of session/set_config_option.
const (
	optionModel    = "model"
	optionThinking = "thinking"
)

// thinkingLevels are agentd's thinking levels, in order.
var thinkingLevels = []string{"off", "low", "medium", "high"}

// modes are agentd's approval policies, offered as ACP session modes.
var modes = []sdk.SessionMode{
	{Id: protocol.ApprovalAsk, Name: "Ask", Description: sdk.Ptr("Ask before a tool call that changes files or runs commands")},
	{Id: protocol.ApprovalReadOnly, Name: "Read-only", Description: sdk.Ptr("Refuse tool calls that change files or run commands")},
	{Id: protocol.ApprovalAll, Name: "Allow all", Description: sdk.Ptr("Run every tool call without asking")},
}

// checkCwd checks an ACP session request's directories: cwd absolute,
// no additional directories.
func checkCwd(cwd string, more []string) error {
	switch {
	case cwd == "" || !filepath.IsAbs(cwd):
		return invalidParams("cwd %q: want an absolute path", cwd)
	case len(more) > 0:
		return invalidParams("additionalDirectories: agentd's sessions have one working directory")
	}
	return nil
}

// NewSession creates an agentd session in cwd and follows it.
func (a *agent) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if err := checkCwd(p.Cwd, p.AdditionalDirectories); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	servers, err := mcpServers(p.McpServers)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	sess, err := call(ctx, a, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: filepath.Clean(p.Cwd), Approval: protocol.ApprovalAsk})
	if err != nil {
		return sdk.NewSessionResponse{}, hostError(err)
	}
	// Recorded before the session is followed, which starts its worker:
	// the worker starts with them.
	if err := a.giveMCP(ctx, sess.SessionID, servers); err != nil {
		// The session is of no use without them: it goes.
		if _, rerr := call(context.WithoutCancel(ctx), a, protocol.OpSessionRemove, protocol.SessionRef{SessionID: sess.SessionID}); rerr != nil {
			a.logger.Warn("a session whose MCP servers were refused is left", "session", sess.SessionID, "err", rerr)
		}
		return sdk.NewSessionResponse{}, err
	}
	if _, _, err := a.open(ctx, sess.SessionID, false); err != nil {
		return sdk.NewSessionResponse{}, hostError(err)
	}
	opts, err := a.configOptions(ctx, sess)
	if err != nil {
		return sdk.NewSessionResponse{}, hostError(err)
	}
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(sess.SessionID), Modes: modeState(sess), ConfigOptions: opts}, nil
}

// LoadSession replays the session's transcript as session/update
// notifications and answers once the last is sent; what is in flight and
// the live updates follow.
func (a *agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if err := checkCwd(p.Cwd, p.AdditionalDirectories); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	servers, err := mcpServers(p.McpServers)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if err := a.giveMCP(ctx, string(p.SessionId), servers); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	// The models are asked for while the history goes out.
	models := make(chan modelsResult, 1)
	go func() {
		m, err := call(ctx, a, protocol.OpModelsList, protocol.ModelsListInput{})
		models <- modelsResult{m, err}
	}()
	_, sess, err := a.open(ctx, string(p.SessionId), true)
	m := <-models
	if err == nil {
		err = m.err
	}
	if err != nil {
		return sdk.LoadSessionResponse{}, hostError(err)
	}
	return sdk.LoadSessionResponse{Modes: modeState(sess), ConfigOptions: optionsOf(m.models, sess)}, nil
}

// ResumeSession follows the session from now on, without its history.
func (a *agent) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	if err := checkCwd(p.Cwd, p.AdditionalDirectories); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	servers, err := mcpServers(p.McpServers)
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	if err := a.giveMCP(ctx, string(p.SessionId), servers); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	_, sess, err := a.open(ctx, string(p.SessionId), false)
	if err != nil {
		return sdk.ResumeSessionResponse{}, hostError(err)
	}
	opts, err := a.configOptions(ctx, sess)
	if err != nil {
		return sdk.ResumeSessionResponse{}, hostError(err)
	}
	return sdk.ResumeSessionResponse{Modes: modeState(sess), ConfigOptions: opts}, nil
}

// CloseSession interrupts the turn this editor's prompt waits on, if
// one does, and stops following the session. The session itself stays.
func (a *agent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.CloseSessionResponse{}, err
	}
	if err := s.cancel(ctx); err != nil {
		return sdk.CloseSessionResponse{}, hostError(err)
	}
	a.mu.Lock()
	if a.sessions[s.id] == s {
		delete(a.sessions, s.id)
	}
	a.mu.Unlock()
	s.close()
	return sdk.CloseSessionResponse{}, nil
}

// ListSessions lists agentd's sessions, the most recently active first,
// of cwd when it is given. A page reads one page of the host's listing;
// its cursor is the host's.
func (a *agent) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	in := protocol.SessionListInput{Limit: listPage}
	if p.Cursor != nil {
		in.Cursor = *p.Cursor
	}
	var cwd string
	if p.Cwd != nil {
		if !filepath.IsAbs(*p.Cwd) {
			return sdk.ListSessionsResponse{}, invalidParams("cwd %q: want an absolute path", *p.Cwd)
		}
		cwd = filepath.Clean(*p.Cwd)
	}
	out := sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}
	for {
		res, err := call(ctx, a, protocol.OpSessionList, in)
		if err != nil {
			if in.Cursor != "" && p.Cursor != nil && in.Cursor == *p.Cursor {
				return out, invalidParams("cursor %q: %v", in.Cursor, err)
			}
			return out, hostError(err)
		}
		for _, s := range res.Sessions {
			if s.Archived || cwd != "" && filepath.Clean(s.Cwd) != cwd {
				continue
			}
			out.Sessions = append(out.Sessions, sessionInfo(s))
		}
		if res.NextCursor == "" {
			return out, nil
		}
		in.Cursor = res.NextCursor
		if len(out.Sessions) > 0 {
			out.NextCursor = &in.Cursor
			return out, nil
		}
	}
}

func sessionInfo(s protocol.Session) sdk.SessionInfo {
	info := sdk.SessionInfo{SessionId: sdk.SessionId(s.SessionID), Cwd: s.Cwd}
	if s.Title != "" {
		info.Title = sdk.Ptr(s.Title)
	}
	if !s.LastActivityAt.IsZero() {
		info.UpdatedAt = sdk.Ptr(s.LastActivityAt.UTC().Format(time.RFC3339Nano))
	}
	return info
}

// SetSessionMode sets the session's approval policy. The host takes a
// policy with a turn: it holds from this editor's next prompt on, and
// the other clients see it then.
func (a *agent) SetSessionMode(_ context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	switch p.ModeId {
	case protocol.ApprovalAsk, protocol.ApprovalReadOnly, protocol.ApprovalAll:
	default:
		return sdk.SetSessionModeResponse{}, invalidParams("modeId %q: want ask, read-only or all", p.ModeId)
	}
	s.mu.Lock()
	s.mode = string(p.ModeId)
	s.mu.Unlock()
	return sdk.SetSessionModeResponse{}, nil
}

// SetSessionConfigOption selects the session's model or thinking level.
func (a *agent) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil {
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("value: agentd's options (model, thinking) take a value id")
	}
	v := p.ValueId
	s, err := a.session(v.SessionId)
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, err
	}
	switch v.ConfigId {
	case optionModel:
		_, err = call(ctx, a, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: s.id, Model: string(v.Value)})
	case optionThinking:
		_, err = call(ctx, a, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: s.id, Level: string(v.Value)})
	default:
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("configId %q: want %s or %s", v.ConfigId, optionModel, optionThinking)
	}
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, hostError(err)
	}
	sess, err := call(ctx, a, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.id})
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, hostError(err)
	}
	opts, err := a.configOptions(ctx, sess)
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, hostError(err)
	}
	return sdk.SetSessionConfigOptionResponse{ConfigOptions: opts}, nil
}

func modeState(sess protocol.Session) *sdk.SessionModeState {
	current := sess.Approval
	if current == "" {
		current = protocol.ApprovalAsk
	}
	return &sdk.SessionModeState{AvailableModes: modes, CurrentModeId: sdk.SessionModeId(current)}
}

// configOptions are the session's model, among the host's models, and
// its thinking level.
func (a *agent) configOptions(ctx context.Context, sess protocol.Session) ([]sdk.SessionConfigOption, error) {
	models, err := call(ctx, a, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		return nil, err
	}
	return optionsOf(models, sess), nil
}

// modelsResult is the answer to models.list.
type modelsResult struct {
	models protocol.ModelsListResult
	err    error
}

// optionsOf are the config options of sess among models.
func optionsOf(models protocol.ModelsListResult, sess protocol.Session) []sdk.SessionConfigOption {
	var choices sdk.SessionConfigSelectOptionsUngrouped
	seen := false
	for _, m := range models.Models {
		spec := m.Provider + "/" + m.ModelID
		o := sdk.SessionConfigSelectOption{Name: spec, Value: sdk.SessionConfigValueId(spec)}
		if m.Unavailable != "" {
			o.Description = sdk.Ptr(m.Unavailable)
		}
		seen = seen || spec == sess.Model
		choices = append(choices, o)
	}
	if !seen && sess.Model != "" {
		choices = append(choices, sdk.SessionConfigSelectOption{Name: sess.Model, Value: sdk.SessionConfigValueId(sess.Model)})
	}
	var levels sdk.SessionConfigSelectOptionsUngrouped
	for _, l := range thinkingLevels {
		levels = append(levels, sdk.SessionConfigSelectOption{Name: l, Value: sdk.SessionConfigValueId(l)})
	}
	thinking := sess.Thinking
	if thinking == "" {
		thinking = "off"
	}
	model := sdk.NewSessionConfigOptionSelect(sdk.SessionConfigValueId(sess.Model), sdk.SessionConfigSelectOptions{Ungrouped: &choices})
	model.Select.Id, model.Select.Name, model.Select.Category = optionModel, "Model", sdk.Ptr(sdk.SessionConfigOptionCategoryModel)
	think := sdk.NewSessionConfigOptionSelect(sdk.SessionConfigValueId(thinking), sdk.SessionConfigSelectOptions{Ungrouped: &levels})
	think.Select.Id, think.Select.Name, think.Select.Category = optionThinking, "Thinking", sdk.Ptr(sdk.SessionConfigOptionCategoryThoughtLevel)
	return []sdk.SessionConfigOption{model, think}
}

// session returns the open session id names.
func (a *agent) session(id sdk.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[string(id)]
	if s == nil {
		return nil, invalidParams("sessionId %q: no session of this connection; session/new, session/load or session/resume opens one", id)
	}
	return s, nil
}

// open follows session id, replacing a stream this editor had of it.
// With replay its transcript is sent first, as history read in pages,
// and the stream, opened behind the answer, resumes after it: the worker
// it may start is not waited for.
func (a *agent) open(ctx context.Context, id string, replay bool) (*session, protocol.Session, error) {
	if id == "" {
		return nil, protocol.Session{}, invalidParams("sessionId: must not be empty")
	}
	sess, err := call(ctx, a, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
	if err != nil {
		return nil, sess, err
	}
	s := newSession(a, sess.SessionID)
	var after uint64
	var f *client.Follower
	if replay {
		if after, err = s.replay(ctx); err != nil {
			s.close()
			return nil, sess, err
		}
	} else {
		if f, err = client.FollowSession(ctx, a.dial, s.id, client.SessionOptions{}); err != nil {
			s.close()
			return nil, sess, err
		}
		sess = f.Session().Snapshot().Session
	}
	a.mu.Lock()
	if a.life.Err() != nil {
		a.mu.Unlock()
		s.close()
		if f != nil {
			f.Close()
		}
		return nil, sess, fmt.Errorf("the editor's connection ended")
	}
	old := a.sessions[s.id]
	a.sessions[s.id] = s
	a.mu.Unlock()
	if old != nil {
		old.close()
	}
	a.wg.Go(func() { s.pump(f, after) })
	return s, sess, nil
}

// dial connects to the host, for a session's stream.
func (a *agent) dial(ctx context.Context) (*client.Conn, error) { return a.cfg.Dial(ctx) }
