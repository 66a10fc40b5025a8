package tui

import (
	"context"
	"sync"

	tea "charm.land/bubbletea/v2"

	"github.com/agentd-dev/agentd/client"
)

// inboxMax bounds the events an inbox holds unread. Past it the inbox
// stops reading: the follower's own buffer fills, and its stream opens
// again after the last record the screen has (client.ErrWatcherSlow).
const inboxMax = 4096

// inbox reads a follower's events as they come, on a goroutine of its
// own, and hands them to the screen in batches: all that came since the
// screen last took them. The screen applies a batch and draws once, so
// that it keeps up with a session that streams fast, and catches up at
// once after a PTY was shown full screen, when Bubble Tea takes no
// messages.
type inbox struct {
	wake chan struct{} // constant; signalled when there is something to take
	room chan struct{} // constant; signalled when the events were taken

	mu  sync.Mutex
	evs []client.FollowEvent // guarded by mu
	err error                // guarded by mu: why reading ended
}

// eventsMsg is a batch of the follower's events, in order, then the error
// that ended its reading, if it ended.
type eventsMsg struct {
	evs []client.FollowEvent
	err error
}

func newInbox() *inbox {
	return &inbox{wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// read reads f's events until ctx ends or f does.
func (in *inbox) read(ctx context.Context, f *client.Follower) {
	for {
		ev, err := f.Next(ctx)
		in.mu.Lock()
		if err != nil {
			in.err = err
		} else {
			in.evs = append(in.evs, ev)
		}
		full := len(in.evs) >= inboxMax
		in.mu.Unlock()
		poke(in.wake)
		if err != nil {
			return
		}
		for full {
			select {
			case <-in.room:
			case <-ctx.Done():
				return
			}
			in.mu.Lock()
			full = len(in.evs) >= inboxMax
			in.mu.Unlock()
		}
	}
}

// next waits for events and takes them all.
func (in *inbox) next(ctx context.Context) tea.Cmd {
	return func() tea.Msg {
		select {
		case <-in.wake:
		case <-ctx.Done():
			return eventsMsg{err: ctx.Err()}
		}
		in.mu.Lock()
		msg := eventsMsg{evs: in.evs, err: in.err}
		in.evs = nil
		in.mu.Unlock()
		poke(in.room)
		return msg
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
