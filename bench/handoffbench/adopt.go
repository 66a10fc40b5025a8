package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// adoptResult is what the adoption of idle workers measured.
type adoptResult struct {
	workers, killed int     // live workers before, and those gone or replaced after
	handoff         handoff // the replacement
}

// adoptIdle runs the adoption of idle workers: sessions each with a live
// worker and nothing else, then `agentd upgrade`.
func (b *bench) adoptIdle(ctx context.Context) (adoptResult, error) {
	var r adoptResult
	ctx, cancel := context.WithTimeout(ctx, 3*settleTimeout)
	defer cancel()
	p, c, err := b.startPlace(ctx, "adopt")
	if err != nil {
		return r, err
	}
	defer p.stop()
	defer c.Close()
	ids := make(chan string)
	var starting sync.WaitGroup
	errs := make(chan error, b.cfg.idle)
	// A subscription starts the session's worker; closed, it leaves the
	// worker idle, for its grace.
	for range 8 {
		starting.Go(func() {
			for id := range ids {
				s, err := c.OpenSession(ctx, id, client.SessionOptions{})
				if err != nil {
					errs <- fmt.Errorf("starting the worker of session %s: %w", id, err)
					continue
				}
				s.Close()
			}
		})
	}
	for i := range b.cfg.idle {
		in := protocol.SessionCreateInput{Cwd: p.work, Title: fmt.Sprintf("idle %d", i+1), Model: "faux/echo"}
		var sess protocol.Session
		if sess, err = client.Call(ctx, c, protocol.OpSessionCreate, in); err != nil {
			err = fmt.Errorf("creating a session: %w", err)
			break
		}
		ids <- sess.SessionID
	}
	close(ids)
	starting.Wait()
	close(errs)
	if err != nil {
		return r, err
	}
	if err := <-errs; err != nil {
		return r, err
	}
	c.Close()
	if err := waitFor(ctx, settleTimeout, "every session's worker", func() bool { return p.liveWorkers() == b.cfg.idle }); err != nil {
		return r, err
	}

	before := p.workers()
	r.workers = len(before)
	b.say("adopt: %d sessions with idle live workers; agentd upgrade\n", r.workers)
	if r.handoff, err = p.upgrade(ctx); err != nil {
		return r, err
	}
	r.killed = p.killed(before)
	b.say("adopt: upgraded in %s\n", dur(r.handoff.took))
	return r, nil
}
