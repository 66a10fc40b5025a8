package sessions

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/internal/guest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/web"
	"github.com/agentd-dev/agentd/protocol"
)

// guestHandlers fills t with the owner's operations on guests: grants,
// and the web listener guests reach the host through.
func (s *Service) guestHandlers(t server.Table) {
	server.Handle(t, protocol.OpGrantCreate, s.createGrant)
	server.Handle(t, protocol.OpGrantList, s.listGrants)
	server.Handle(t, protocol.OpGrantRevoke, s.revokeGrant)
	server.Handle(t, protocol.OpHostWebStart, s.startWeb)
	server.Handle(t, protocol.OpHostWebStop, s.stopWeb)
}

// notFound is what a guest hears of a session it holds no grant for,
// word for word what it hears of one that does not exist.
func notFound(ref string) error {
	return protocol.Errorf(protocol.CodeNotFound, "session %q not found", ref)
}

// authorizeGuest decides a guest's call: its grant must be in force, name
// the session the input names (by its id or a prefix of it), and be of a
// level that allows the operation's access (protocol.Grants). A session
// the grant does not name is not_found whatever it is; an operation that
// names no session is one of reading (the listing, filtered to the
// grant's session, the guest's own subscriptions), never more.
func (s *Service) authorizeGuest(call *server.Call, ref *string) error {
	g, ok := s.grants.Get(call.Caller.Principal.ID)
	if ref != nil {
		if !ok || !strings.HasPrefix(g.SessionID, *ref) {
			return notFound(*ref)
		}
		*ref = g.SessionID
	}
	if call.Operation.Name == string(protocol.OpHostStatus) {
		return nil
	}
	level := g.Level
	if !ok {
		// A guest whose grant ended may still read what names no
		// session: an empty listing, its subscriptions' ends.
		level = protocol.GrantObserve
	}
	if !protocol.Grants(level, call.Operation.Access) || ref == nil && call.Operation.Access != protocol.AccessRead {
		return protocol.Errorf(protocol.CodeUnauthorized, "%s is not allowed by a grant to %s", call.Operation.Name, level)
	}
	if ok {
		s.grants.Use(g.GrantID)
	}
	return nil
}

// Confirm implements server.Confirmer: a guest whose grant ended while
// its call ran does not see the call's result, which is then as if the
// session did not exist, and what the call opened for it ends.
func (s *Service) Confirm(call *server.Call) error {
	if call.Caller.Principal.Kind != protocol.PrincipalGuest {
		return nil
	}
	if _, ok := s.grants.Get(call.Caller.Principal.ID); ok {
		return nil
	}
	if c, err := clientOf(call); err == nil {
		c.endAccess()
	}
	if in, ok := call.Decoded().(protocol.SessionScoped); ok && *in.SessionRef() != "" {
		return notFound(*in.SessionRef())
	}
	if name := call.Operation.Name; name == string(protocol.OpSessionList) || name == string(protocol.OpSessionListWatch) {
		return protocol.Errorf(protocol.CodeUnauthorized, "%s: the guest holds no grant in force", name)
	}
	return nil
}

// guestList is session.list for a guest: the session of its grant, when
// it is in force.
func (s *Service) guestList(call *server.Call, in *protocol.SessionListInput) protocol.SessionListResult {
	out := protocol.SessionListResult{Sessions: []protocol.Session{}}
	g, ok := s.grants.Get(call.Caller.Principal.ID)
	if !ok || in.Cursor != "" {
		return out
	}
	h, err := s.cat.Get(g.SessionID)
	if err != nil || h.Archived && !in.IncludeArchived {
		return out
	}
	out.Sessions = append(out.Sessions, s.session(h))
	return out
}

func (s *Service) createGrant(_ context.Context, _ *server.Call, in *protocol.GrantCreateInput) (protocol.GrantCreateResult, error) {
	h, err := s.resolveLive(in.SessionID)
	if err != nil {
		return protocol.GrantCreateResult{}, err
	}
	g, token, err := s.grants.Create(h.ID, in.Level, in.Label, in.ExpiresAt)
	if err != nil {
		return protocol.GrantCreateResult{}, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	s.expireLater(g)
	res := protocol.GrantCreateResult{Grant: g, Token: token}
	if l := s.webListener(); l != nil {
		// The level tells the page which controls to show; the host
		// decides what the token may do whatever the link says.
		res.URL = l.Info().URL + "#token=" + token + "&level=" + g.Level
	}
	return res, nil
}

func (s *Service) listGrants(context.Context, *server.Call, *protocol.GrantListInput) (protocol.GrantListResult, error) {
	return protocol.GrantListResult{Grants: s.grants.List()}, nil
}

// revokeGrant revokes a grant and ends, at once, what its guest holds:
// its subscriptions close as access_revoked, dropping what they had
// queued, and the PTYs it controls are released.
func (s *Service) revokeGrant(_ context.Context, _ *server.Call, in *protocol.GrantRef) (protocol.Grant, error) {
	g, err := s.grants.Revoke(in.GrantID)
	if errors.Is(err, guest.ErrNoGrant) {
		return protocol.Grant{}, protocol.Errorf(protocol.CodeNotFound, "%v", err)
	}
	s.stopExpiry(g.GrantID)
	s.endGuests(g.GrantID)
	if err != nil {
		return protocol.Grant{}, err
	}
	return g, nil
}

// expireLater ends what grant g's guest holds once g expires, as its
// revocation does.
func (s *Service) expireLater(g protocol.Grant) {
	if g.ExpiresAt == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expiries == nil {
		return // closed
	}
	var t *time.Timer
	t = time.AfterFunc(time.Until(*g.ExpiresAt), func() {
		s.mu.Lock()
		if s.expiries[g.GrantID] != t {
			s.mu.Unlock()
			return // revoked, or the service closed
		}
		delete(s.expiries, g.GrantID)
		// Counted under mu, before Close can wait for the group.
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()
		s.endGuests(g.GrantID)
	})
	s.expiries[g.GrantID] = t
}

// stopExpiry forgets grant id's expiry.
func (s *Service) stopExpiry(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.expiries[id]; ok {
		t.Stop()
		delete(s.expiries, id)
	}
}

// stopExpiries stops every expiry, for good: the service closes.
func (s *Service) stopExpiries() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.expiries {
		t.Stop()
	}
	s.expiries = nil
}

// endGuests ends what the connections of the guests of grants hold.
func (s *Service) endGuests(grants ...string) {
	s.mu.Lock()
	var ending []*clientConn
	for c := range s.guests {
		if slices.Contains(grants, c.id.Principal.ID) {
			ending = append(ending, c)
		}
	}
	s.mu.Unlock()
	for _, c := range ending {
		c.endAccess()
	}
}

// endAccess ends the connection's subscriptions as access_revoked and
// releases the PTYs it controls; the connection stays open.
func (c *clientConn) endAccess() {
	c.mu.Lock()
	subs, held, lists := c.subs, c.controllers, c.lists
	c.subs, c.controllers, c.lists = map[string]*subscription{}, map[string]controllerHeld{}, map[string]*listWatch{}
	c.mu.Unlock()
	for _, sub := range subs {
		sub.end(func() { sub.q.Abort(fanout.Reason(protocol.ClosedAccessRevoked)) })
	}
	for _, lw := range lists {
		lw.end(c.s, protocol.ClosedAccessRevoked)
	}
	c.s.releaseControllers(slices.Collect(maps.Values(held)))
}

// webListener returns the web listener, or nil.
func (s *Service) webListener() *web.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.web
}

// startWeb starts the web listener, or returns the one that runs, with a
// new owner's login token either way.
func (s *Service) startWeb(_ context.Context, _ *server.Call, in *protocol.WebStartInput) (protocol.WebListener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.web != nil {
		info := s.web.Info()
		if in.Listen != "" && in.Listen != info.Address {
			return protocol.WebListener{}, protocol.Errorf(protocol.CodeOperationConflict, `field "listen": the host already listens on %s`, info.Address)
		}
		info.OwnerToken = s.web.NewOwnerToken()
		return info, nil
	}
	if s.draining {
		return protocol.WebListener{}, protocol.Errorf(protocol.CodeDraining, "the host is draining")
	}
	l, token, err := web.Start(web.Config{
		Server: s.host, Grants: s.grants, Listen: in.Listen, CertFile: in.CertFile, KeyFile: in.KeyFile, Home: s.cfg.Home, Logger: s.log,
	})
	if err != nil {
		return protocol.WebListener{}, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	s.web, s.webOff = l, ""
	info := l.Info()
	s.log.Info("web listener started", "address", info.Address, "loopback", info.Loopback)
	info.OwnerToken = token
	return info, nil
}

// resumeWebPatience is how long a host that starts tries the address its
// web listener was recorded on while it is taken: the host it replaces
// lets go of it as it hands off, which may be a moment after this host
// serves.
const resumeWebPatience = 10 * time.Second

// resumeWeb listens on the web again as the listener recorded in the
// home did (web.Recorded), once the host serves. An address taken past
// resumeWebPatience, or any other failure, is logged, and the host stays
// off the web until asked.
func (s *Service) resumeWeb(rec web.Config) {
	select {
	case <-s.host.Ready():
	case <-s.ctx.Done():
		return
	}
	deadline := time.Now().Add(resumeWebPatience)
	delay := 10 * time.Millisecond
	for {
		info, err := s.startRecordedWeb(rec)
		if err == nil {
			if info.Address != "" {
				s.log.Info("web listener started again, as recorded", "address", info.Address, "loopback", info.Loopback)
			}
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			s.log.Warn("the web listener recorded in the home is left off: agentd web starts one", "listen", rec.Listen, "err", err)
			s.mu.Lock()
			if s.web == nil {
				s.webOff = err.Error()
			}
			s.mu.Unlock()
			return
		}
		select {
		case <-time.After(delay):
		case <-s.ctx.Done():
			return
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// startRecordedWeb starts the listener rec describes, unless one runs
// (the owner asked meanwhile) or the host no longer takes connections;
// it returns the listener it started, or an empty one.
func (s *Service) startRecordedWeb(rec web.Config) (protocol.WebListener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.web != nil || s.draining || s.expiries == nil {
		return protocol.WebListener{}, nil
	}
	rec.Server, rec.Grants, rec.Home, rec.Logger = s.host, s.grants, s.cfg.Home, s.log
	l, _, err := web.Start(rec)
	if err != nil {
		return protocol.WebListener{}, err
	}
	s.web = l
	return l.Info(), nil
}

// stopWeb stops the web listener for good: it no longer accepts, its
// record and logins leave the home, and its connections end.
func (s *Service) stopWeb(context.Context, *server.Call, *protocol.WebStopInput) (protocol.WebStopResult, error) {
	s.mu.Lock()
	l := s.web
	s.web, s.webOff = nil, ""
	var err error
	if l != nil {
		err = l.Forget()
		// Its connections end apart from this call: it may be one of
		// them.
		s.wg.Go(func() { l.Close() })
	} else {
		err = web.Forget(s.cfg.Home)
	}
	s.mu.Unlock()
	var res protocol.WebStopResult
	if l != nil {
		res.Address = l.Info().Address
		s.log.Info("web listener stopped for good", "address", res.Address)
	}
	return res, err
}

// closeWeb stops the web listener, if one runs, and the grants' expiries.
func (s *Service) closeWeb() {
	s.stopExpiries()
	s.mu.Lock()
	l := s.web
	s.web = nil
	s.mu.Unlock()
	if l != nil {
		l.Close()
	}
}
