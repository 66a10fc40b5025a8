package sessions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

func (s *Service) handlers() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpSessionList, s.list)
	server.Handle(t, protocol.OpSessionListWatch, s.watchList)
	server.Handle(t, protocol.OpSessionCreate, s.create)
	server.Handle(t, protocol.OpSessionGet, s.get)
	server.Handle(t, protocol.OpSessionRename, s.rename)
	server.Handle(t, protocol.OpSessionArchive, s.archive)
	server.Handle(t, protocol.OpSessionUnarchive, s.unarchive)
	server.Handle(t, protocol.OpSessionRemove, s.remove)
	server.Handle(t, protocol.OpSessionFork, s.fork)
	server.Handle(t, protocol.OpSessionRewind, s.rewind)
	server.Handle(t, protocol.OpSessionPluginsSet, s.setPlugins)
	server.Handle(t, protocol.OpSessionMCPSet, s.setMCP)
	server.Handle(t, protocol.OpModelsList, s.models)
	server.Handle(t, protocol.OpModelsSelect, s.selectModel)
	server.Handle(t, protocol.OpSubscriptionOpen, s.open)
	server.Handle(t, protocol.OpSubscriptionReady, s.ready)
	server.Handle(t, protocol.OpSubscriptionClose, s.closeSubscription)
	t[string(protocol.OpSessionTranscriptPage)] = s.pageTranscript
	server.Handle(t, protocol.OpSubscriptionPtyInterestSet, s.setPtyInterest)
	server.Handle(t, protocol.OpRuntimeResourceOutputRead, s.readOutput)
	s.addSessionOps(t)
	s.guestHandlers(t)
	return t
}

func (s *Service) session(h catalog.Header) protocol.Session {
	return h.Session(s.status(h.ID))
}

func (s *Service) list(_ context.Context, call *server.Call, in *protocol.SessionListInput) (protocol.SessionListResult, error) {
	if call.Caller.Principal.Kind == protocol.PrincipalGuest {
		return s.guestList(call, in), nil
	}
	limit := in.Limit
	if limit == 0 {
		limit = protocol.DefaultSessionPage
	}
	// One more than the page: whether more follow.
	opts := catalog.ListOptions{IncludeArchived: in.IncludeArchived, Limit: limit + 1}
	if in.Cursor != "" {
		at, id, err := decodeListCursor(in.Cursor)
		if err != nil {
			return protocol.SessionListResult{}, protocol.Errorf(protocol.CodeInvalidRequest, `field "input.cursor": %v`, err)
		}
		// The listing runs newest first, then by id: it goes on after
		// the cursor's place in that order, wherever sessions moved since.
		opts.After = &catalog.ListPlace{At: at, ID: id}
	}
	hs := s.cat.List(opts)
	out := protocol.SessionListResult{Sessions: make([]protocol.Session, 0, min(len(hs), limit))}
	for _, h := range hs[:min(len(hs), limit)] {
		out.Sessions = append(out.Sessions, s.session(h))
	}
	if len(hs) > limit {
		last := hs[limit-1]
		out.NextCursor = encodeListCursor(last.LastActivityAt.UnixNano(), last.ID)
	}
	return out, nil
}

func encodeListCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + ":" + id))
}

func decodeListCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if at, id, ok := strings.Cut(string(b), ":"); ok {
			if n, err := strconv.ParseInt(at, 10, 64); err == nil && id != "" {
				return n, id, nil
			}
		}
	}
	return 0, "", errors.New("is not a cursor this host gave")
}

func (s *Service) create(_ context.Context, _ *server.Call, in *protocol.SessionCreateInput) (protocol.Session, error) {
	model := in.Model
	if model == "" {
		model = s.cat.ModelForNew(s.cfg.Models.Default())
	} else if err := s.cfg.Models.Check(model); err != nil {
		return protocol.Session{}, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	approval := in.Approval
	if approval == "" {
		approval = protocol.ApprovalAsk
	}
	if err := checkPackages(in.Plugins); err != nil {
		return protocol.Session{}, err
	}
	h, err := s.cat.Create(catalog.CreateOptions{ID: in.SessionID, Cwd: in.Cwd, Title: in.Title, Model: model, Approval: approval, Thinking: "off",
		Sandbox: in.Sandbox, Network: in.Network, Plugins: in.Plugins,
	})
	if err != nil {
		return protocol.Session{}, catalogError(err)
	}
	return s.session(h), nil
}

func (s *Service) get(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.Session, error) {
	h, err := s.cat.Resolve(in.SessionID)
	if err != nil {
		return protocol.Session{}, catalogError(err)
	}
	return s.session(h), nil
}

func (s *Service) rename(_ context.Context, _ *server.Call, in *protocol.SessionRenameInput) (protocol.Session, error) {
	h, err := s.resolveLive(in.SessionID)
	if err != nil {
		return protocol.Session{}, err
	}
	if h, err = s.cat.Rename(h.ID, in.Title); err != nil {
		return protocol.Session{}, catalogError(err)
	}
	return s.session(h), nil
}

func (s *Service) archive(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.Session, error) {
	h, err := s.resolveLive(in.SessionID)
	if err != nil {
		return protocol.Session{}, err
	}
	// A request that read the session before the archive began starts
	// no worker once its worker is stopped: nothing of the session runs
	// once the archive returns.
	id := h.ID
	s.setArchived(id, true)
	s.stopWorker(id)
	if h, err = s.cat.Archive(id); err != nil {
		s.setArchived(id, false)
		return protocol.Session{}, catalogError(err)
	}
	return s.session(h), nil
}

// setArchived records whether session id is archived (or being
// archived), for ensureWorker.
func (s *Service) setArchived(id string, archived bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if archived {
		s.archived[id] = true
	} else {
		delete(s.archived, id)
	}
}

func (s *Service) unarchive(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.Session, error) {
	h, err := s.resolve(in.SessionID)
	if err != nil {
		return protocol.Session{}, err
	}
	if h, err = s.cat.Unarchive(h.ID); err != nil {
		return protocol.Session{}, catalogError(err)
	}
	s.setArchived(h.ID, false)
	return s.session(h), nil
}

func (s *Service) remove(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.SessionRef, error) {
	h, err := s.cat.Resolve(in.SessionID)
	if err != nil {
		return protocol.SessionRef{}, catalogError(err)
	}
	// A request that read the session before the remove began starts no
	// worker while the remove runs, nor after it, when the catalog no
	// longer has the session: nothing of it runs once the remove returns.
	s.fenceRemove(h.ID, 1)
	defer s.fenceRemove(h.ID, -1)
	s.stopWorker(h.ID)
	if err := s.cat.Remove(h.ID); err != nil {
		return protocol.SessionRef{}, catalogError(err)
	}
	s.forgetMCP(h.ID)
	var ended []string
	for _, g := range s.grants.RevokeSession(h.ID) {
		s.stopExpiry(g.GrantID)
		ended = append(ended, g.GrantID)
	}
	s.endGuests(ended...)
	return protocol.SessionRef{SessionID: h.ID}, nil
}

// fenceRemove counts a remove of session id beginning (+1) or ending
// (-1), for ensureWorker.
func (s *Service) fenceRemove(id string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removing[id] += delta; s.removing[id] == 0 {
		delete(s.removing, id)
	}
}

// stopWorker stops a session's worker, if one runs, closing its
// subscriptions as removed.
func (s *Service) stopWorker(id string) {
	s.mu.Lock()
	w := s.workers[id]
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.endSubscriptions(protocol.ClosedSessionRemoved)
	w.stop()
}

func (s *Service) models(context.Context, *server.Call, *protocol.ModelsListInput) (protocol.ModelsListResult, error) {
	def := s.cat.ModelForNew(s.cfg.Models.Default())
	m, err := parseModel(def)
	out := protocol.ModelsListResult{Models: s.cfg.Models.Available(), Providers: s.cfg.Models.Providers()}
	if err == nil {
		// The default as the listing has it, with its source and window.
		for _, listed := range out.Models {
			if listed.Provider == m.Provider && listed.ModelID == m.ModelID {
				m = listed
				break
			}
		}
		out.Default = &m
	}
	return out, nil
}

func parseModel(spec string) (protocol.Model, error) {
	if err := catalog.ValidModel(spec); err != nil {
		return protocol.Model{}, err
	}
	for i := range spec {
		if spec[i] == '/' {
			return protocol.Model{Provider: spec[:i], ModelID: spec[i+1:]}, nil
		}
	}
	return protocol.Model{}, catalog.ErrInvalidModel
}

func (s *Service) selectModel(ctx context.Context, call *server.Call, in *protocol.ModelsSelectInput) (protocol.ModelSelection, error) {
	if err := catalog.ValidModel(in.Model); err != nil {
		if !strings.Contains(in.Model, "/") && strings.TrimSpace(in.Model) != "" {
			// A word alone is taken for a provider: the providers say
			// whether it names one (and which models it has) or not.
			if perr := s.cfg.Models.Check(in.Model); perr != nil {
				err = perr
			}
		}
		return protocol.ModelSelection{}, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	if err := s.cfg.Models.Check(in.Model); err != nil {
		return protocol.ModelSelection{}, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	if in.SessionID != "" {
		// The session's worker holds its model; the catalog follows. The
		// choice is that session's alone.
		h, err := s.resolveLive(in.SessionID)
		if err != nil {
			return protocol.ModelSelection{}, err
		}
		in.SessionID = h.ID
		res, err := forward[protocol.ModelSelection](ctx, s, h, &call.Caller, call.Operation.Name, in)
		if err != nil {
			return res, err
		}
		// Recorded before the answer, so a worker killed at once does not
		// take the choice with it.
		if _, err := s.cat.SetModel(h.ID, in.Model); err != nil {
			return res, catalogError(err)
		}
		return res, nil
	}
	// The model a person last chose is the one new sessions start with.
	if _, err := s.cat.RecordSelectedModel(in.Model); err != nil {
		return protocol.ModelSelection{}, catalogError(err)
	}
	return protocol.ModelSelection{Model: in.Model}, nil
}

func (s *Service) open(ctx context.Context, call *server.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
	c, err := clientOf(call)
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	h, err := s.resolve(in.SessionID)
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	w, err := s.ensureWorker(ctx, h)
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	defer w.release()
	sub, snap := w.subscribe(c, in)
	c.mu.Lock()
	c.subs[sub.id] = sub
	c.mu.Unlock()
	raw, err := json.Marshal(snap)
	if err != nil {
		sub.close(protocol.ClosedClientClosed)
		return protocol.SubscriptionOpenResult{}, err
	}
	if len(in.Ptys) > 0 {
		if err := w.choosePTYs(ctx, sub, in.Ptys, nil); err != nil {
			// Refused: the subscription goes as if it never opened, and
			// no frame of it is written.
			sub.abort()
			return protocol.SubscriptionOpenResult{}, ptysRefused(err)
		}
	}
	if in.Ready {
		// The client learns the subscription's id from the response:
		// its frames follow it.
		call.AfterResponse(sub.markReady)
	}
	return protocol.SubscriptionOpenResult{HostEpoch: s.host.Epoch(), SubscriptionID: sub.id, NextSequence: 1, Snapshot: raw}, nil
}

// ptysRefused is the error of an open whose PTYs the worker would not
// stream (not the session's, or a shell run's), naming the open's field.
func ptysRefused(err error) error {
	var re *link.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	reason := re.Message
	if strings.HasPrefix(reason, `field "`) {
		if _, after, ok := strings.Cut(reason, `": `); ok {
			reason = after
		}
	}
	return protocol.Errorf(re.Code, "field %q: %s", "input.ptys", reason)
}

func (s *Service) ready(_ context.Context, call *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
	sub, err := subscriptionOf(call, in.SubscriptionID)
	if err != nil {
		return protocol.SubscriptionRef{}, err
	}
	sub.markReady()
	return *in, nil
}

func (s *Service) closeSubscription(ctx context.Context, call *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
	if c, err := clientOf(call); err == nil {
		c.mu.Lock()
		lw := c.lists[in.SubscriptionID]
		c.mu.Unlock()
		if lw != nil {
			// Its closed frame goes before this response.
			lw.end(s, protocol.ClosedClientClosed)
			select {
			case <-lw.finished:
			case <-ctx.Done():
			}
			return *in, nil
		}
	}
	sub, err := subscriptionOf(call, in.SubscriptionID)
	if err != nil {
		return protocol.SubscriptionRef{}, err
	}
	sub.c.forget(sub)
	sub.close(protocol.ClosedClientClosed)
	return *in, nil
}

// pageTranscript reads a page of the transcript of a subscription's
// session, or of a session named by id, from its worker. The worker's
// page is passed on as it wrote it, neither decoded nor encoded again: a
// first screen waits for it.
func (s *Service) pageTranscript(ctx context.Context, call *server.Call) (any, error) {
	in := call.Decoded().(*protocol.TranscriptPageInput)
	selector := in.SessionID
	if in.SubscriptionID != "" {
		sub, err := subscriptionOf(call, in.SubscriptionID)
		if err != nil {
			return nil, err
		}
		selector = sub.w.sessionID
	}
	h, err := s.resolve(selector)
	if err != nil {
		return nil, err
	}
	fwd := *in
	fwd.SubscriptionID, fwd.SessionID = "", h.ID
	return forward[json.RawMessage](ctx, s, h, &call.Caller, call.Operation.Name, &fwd)
}
