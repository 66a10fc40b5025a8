package resource

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd/protocol"
)

// Acquire makes the connection conn, which is who, the controller of a
// running PTY: the PTY's state names who from then on, until control
// ends. A PTY has at most one controller: another connection's acquire
// conflicts until it releases, its connection closes or the PTY exits.
// Acquiring again a PTY conn controls answers the same controller. The
// result carries the screen as it is now, its oldest lines left out when
// the whole would not fit in a message.
func (m *Manager) Acquire(conn string, who protocol.ResourceController, ref string) (protocol.ControllerAcquireResult, error) {
	m.mu.Lock()
	r, err := m.writableLocked(ref)
	if err != nil {
		m.mu.Unlock()
		return protocol.ControllerAcquireResult{}, err
	}
	c := r.ctl
	switch {
	case c == nil:
		m.ctls++
		c = &controller{id: fmt.Sprintf("ctl-%d", m.ctls), conn: conn, res: r, next: 1}
		r.ctl = c
		m.controllers[c.id] = c
		r.info.Controller = &who
		m.changedLocked(r)
	case c.conn != conn:
		m.mu.Unlock()
		return protocol.ControllerAcquireResult{}, protocol.Errorf(protocol.CodeOperationConflict,
			"%s is controlled from another terminal: watch it, or acquire it once they release it", ref)
	}
	res := protocol.ControllerAcquireResult{ControllerID: c.id, NextSequence: c.next, Resource: r.info}
	m.mu.Unlock()

	lines, cursor, _ := r.screen.draw()
	return fitScreen(res, lines, cursor), nil
}

// acquireOverhead bounds what a response adds around its result.
const acquireOverhead = 1 << 10

// fitScreen sets res.Screen to the screen of lines, leaving out as many
// of its oldest lines as the result needs to fit in a message.
func fitScreen(res protocol.ControllerAcquireResult, lines []string, cursor string) protocol.ControllerAcquireResult {
	res.Screen = drawLines(lines, cursor)
	b, _ := json.Marshal(res)
	room := protocol.MaxMessageBytes - acquireOverhead
	if len(b) <= room {
		return res
	}
	// Keep the newest lines whose encoded size, with the line break each
	// adds, fits in what the rest leaves.
	res.Screen = drawLines(nil, cursor)
	b, _ = json.Marshal(res)
	left, keep := room-len(b), len(lines)
	for keep > 0 {
		line, _ := json.Marshal(lines[keep-1])
		size := len(line) - len(`""`) + len(`\r\n`)
		if size > left {
			break
		}
		left -= size
		keep--
	}
	res.Screen = drawLines(lines[keep:], cursor)
	return res
}

// Control applies a controller's call: input written, the PTY resized.
// Calls carry sequences 1, 2, 3…; one out of order conflicts, except a
// retry of the controller's last call, which is answered again without
// being applied twice (and conflicts if its input differs). The call that
// carries the last sequence there is releases the controller.
func (m *Manager) Control(conn string, in protocol.ControlInput) (protocol.ControlResult, error) {
	m.mu.Lock()
	if rp, ok := m.replays[in.ControllerID]; ok && rp.conn == conn && rp.ref == in.Ref && rp.input.Sequence == in.Sequence {
		m.mu.Unlock()
		if rp.input != in {
			return protocol.ControlResult{}, protocol.Errorf(protocol.CodeOperationConflict,
				"sequence %d was sent before with other input: a retry must repeat the call as it was", in.Sequence)
		}
		return rp.result, nil
	}
	c, err := m.controllerLocked(conn, in.Ref, in.ControllerID)
	if err == nil && in.Sequence != c.next {
		err = protocol.Errorf(protocol.CodeOperationConflict, "sequence %d is out of order: the controller's next is %d", in.Sequence, c.next)
	}
	if err != nil {
		m.mu.Unlock()
		return protocol.ControlResult{}, err
	}
	r := c.res
	// The call is applied under the lock so that calls of one controller
	// reach the PTY in their order; a write to a terminal does not wait
	// on a reader for long (the kernel holds 4 KiB or more).
	defer m.mu.Unlock()
	if in.Cols > 0 || in.Rows > 0 {
		if err := m.resizeLocked(r, in.Cols, in.Rows); err != nil {
			return protocol.ControlResult{}, err
		}
	}
	if in.Data != "" {
		if err := m.write(r, []byte(in.Data)); err != nil {
			m.releaseLocked(c)
			return protocol.ControlResult{}, err
		}
	}
	res := protocol.ControlResult{Sequence: in.Sequence}
	m.rememberLocked(controlReplay{conn: conn, ref: in.Ref, input: in, result: res})
	if c.next >= m.maxSequence {
		m.releaseLocked(c)
	} else {
		c.next++
	}
	return res, nil
}

// Type writes data, keys typed on a terminal the controller lent its
// worker, to PTY ref as controller id of conn, outside the controller's
// sequence of calls: while the terminal is lent, its client makes no call
// that writes.
func (m *Manager) Type(conn, ref, id string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.controllerLocked(conn, ref, id)
	if err != nil {
		return err
	}
	if err := m.write(c.res, data); err != nil {
		m.releaseLocked(c)
		return err
	}
	return nil
}

// controllerLocked finds the controller id of conn on PTY ref.
func (m *Manager) controllerLocked(conn, ref, id string) (*controller, error) {
	if _, err := m.findLocked(ref); err != nil {
		return nil, err
	}
	c, ok := m.controllers[id]
	if !ok || c.conn != conn {
		return nil, protocol.Errorf(protocol.CodeOperationConflict, "%s does not control anything of this connection: acquire %s again", id, ref)
	}
	if c.res.info.Ref != ref {
		return nil, protocol.Errorf(protocol.CodeOperationConflict, "%s controls %s, not %s", id, c.res.info.Ref, ref)
	}
	return c, nil
}

// resizeLocked resizes r's terminal and its screen; 0 leaves a dimension.
func (m *Manager) resizeLocked(r *resource, cols, rows int) error {
	w, h := r.screen.size()
	cols, rows = cmp.Or(cols, w), cmp.Or(rows, h)
	was := r.info
	if r.info.Cols != cols || r.info.Rows != rows {
		// Told before the program learns of it: what it prints at the
		// new size follows the change, and a watcher plays it at that
		// size.
		r.info.Cols, r.info.Rows = cols, rows
		m.changedLocked(r)
	}
	if err := setSize(r.out, cols, rows); err != nil {
		if r.info != was {
			r.info = was
			m.changedLocked(r)
		}
		return protocol.Errorf(protocol.CodeOperationConflict, "%s cannot be resized: %v", r.info.Ref, err)
	}
	r.screen.resize(cols, rows)
	return nil
}

// Release ends conn's control of PTY ref. Releasing a PTY nobody controls
// is done already; one another connection controls conflicts.
func (m *Manager) Release(conn, ref, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.findLocked(ref)
	if err != nil {
		return err
	}
	c := r.ctl
	if c == nil {
		delete(m.replays, id)
		return nil
	}
	if c.conn != conn || c.id != id {
		return protocol.Errorf(protocol.CodeOperationConflict, "%s is controlled by another terminal, not by %s", ref, id)
	}
	m.releaseLocked(c)
	return nil
}

// ReleaseConnections ends every control held by a connection whose name
// starts with prefix: those connections closed.
func (m *Manager) ReleaseConnections(prefix string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.controllers {
		if strings.HasPrefix(c.conn, prefix) {
			m.releaseLocked(c)
		}
	}
	for id, rp := range m.replays {
		if strings.HasPrefix(rp.conn, prefix) {
			delete(m.replays, id)
		}
	}
}

// releaseLocked ends control c, and forgets its last call.
func (m *Manager) releaseLocked(c *controller) {
	if c == nil {
		return
	}
	if r := c.res; r.ctl == c {
		r.ctl = nil
		r.info.Controller = nil
		if r.info.State == protocol.ResourceRunning {
			m.changedLocked(r)
		}
	}
	delete(m.controllers, c.id)
	delete(m.replays, c.id)
	if m.cfg.OnControlEnd != nil {
		m.cfg.OnControlEnd(c.id)
	}
}

// Holds reports, as an error, whether controller id of connection conn
// controls PTY ref now.
func (m *Manager) Holds(conn, ref, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.controllerLocked(conn, ref, id)
	return err
}

// rememberLocked keeps rp for a retry, forgetting the oldest beyond
// m.maxReplays. Controller ids are never given twice, so an id forgotten
// does not come back.
func (m *Manager) rememberLocked(rp controlReplay) {
	id := rp.input.ControllerID
	if _, ok := m.replays[id]; !ok {
		m.replayOrder = append(m.replayOrder, id)
	}
	m.replays[id] = rp
	for len(m.replays) > m.maxReplays {
		oldest := m.replayOrder[0]
		m.replayOrder = m.replayOrder[1:]
		delete(m.replays, oldest)
	}
	if len(m.replayOrder) > 2*m.maxReplays {
		m.replayOrder = slices.DeleteFunc(m.replayOrder, func(id string) bool {
			_, kept := m.replays[id]
			return !kept
		})
	}
}
