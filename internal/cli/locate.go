package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/protocol"
)

// located is a session found on one of the hosts of the runtime directory.
type located struct {
	conn    *client.Conn
	session protocol.Session
	hostID  string
	home    string
}

// locateSession finds the one session selector names among every host of
// the runtime directory, this home's host first (started if none runs).
// A selector matching on no host is not found; on several, ambiguous,
// and the error lists where.
func locateSession(ctx context.Context, selector string) (located, error) {
	return locateSessionWith(ctx, selector, nil)
}

// locateSessionWith is locateSession calling opened, when set, once, with
// the connection to this home's host as soon as its hello has gone out,
// before the host has answered it and the session is looked up: for
// requests about the session that need not wait for either (started on
// goroutines of their own, they go out behind the hello), their answers
// used when the session is found on that connection. Should that
// handshake fail and another connection be opened, opened is not called
// again: what it started fails, and the connection found is another.
func locateSessionWith(ctx context.Context, selector string, opened func(*client.Conn)) (located, error) {
	if selector == "" {
		return located{}, usagef("the session must not be empty: give its id or a prefix of it")
	}
	var found []located
	var lastErr error
	// What session.get answered on a connection.
	type answer struct {
		s   protocol.Session
		err error
	}
	get := func(c *client.Conn) answer {
		s, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: selector})
		return answer{s, err}
	}
	try := func(c *client.Conn, a answer, hostID, home string) bool {
		switch {
		case a.err == nil:
			found = append(found, located{conn: c, session: a.s, hostID: hostID, home: home})
			return true
		case errors.Is(a.err, client.ErrNotFound):
		default:
			lastErr = a.err
		}
		return false
	}
	// This home's host is asked behind the hello, before opened's
	// requests go: the last goroutine started runs first.
	var asking sync.WaitGroup
	var asked *client.Conn // guarded by asking
	var ownAnswer answer   // guarded by asking
	pipeline := func(c *client.Conn) {
		asking.Wait() // the one asked on a connection that failed
		asked = c
		asking.Go(func() { ownAnswer = get(c) })
		if opened != nil {
			opened(c)
			opened = nil
		}
	}
	own, info, err := openOwnWith(ctx, protocol.SurfaceCLI, pipeline)
	if err != nil {
		asking.Wait()
		return located{}, err
	}
	// The other hosts are found while this home's host answers.
	var hosts []client.HostInfo
	var discovering sync.WaitGroup
	discovering.Go(func() { hosts, _ = activation.DiscoverOthers(ctx, mustRuntimeDir(), info.HostID) })
	asking.Wait()
	a := ownAnswer
	if asked != own {
		a = get(own)
	}
	if !try(own, a, info.HostID, info.Home) {
		defer own.Close()
	}
	discovering.Wait()
	for _, h := range hosts {
		c, err := client.Dial(ctx, h.Endpoint, client.Options{Surface: protocol.SurfaceCLI})
		if err != nil {
			continue
		}
		if !try(c, get(c), h.HostID, h.Home) {
			c.Close()
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		if lastErr != nil {
			return located{}, lastErr
		}
		return located{}, codedError{protocol.CodeNotFound, fmt.Errorf("no session %q on any host", selector)}
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = fmt.Sprintf("%s on host %s", f.session.SessionID, f.hostID)
		f.conn.Close()
	}
	return located{}, codedError{protocol.CodeSessionAmbiguous, fmt.Errorf("session %q is ambiguous across hosts: %s", selector, strings.Join(names, ", "))}
}

// withSession runs fn with the session selector names and a connection to
// its host.
func withSession(cmd *cobra.Command, selector string, fn func(ctx context.Context, l located) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	l, err := locateSession(ctx, selector)
	if err != nil {
		return err
	}
	defer l.conn.Close()
	return fn(ctx, l)
}
