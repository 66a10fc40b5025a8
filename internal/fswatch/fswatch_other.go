//go:build !linux

// Package fswatch wakes a waiter when the files it depends on change,
// through inotify where there is one, and otherwise after each wait's
// timeout.
package fswatch

import (
	"context"
	"time"
)

// Watcher would wake a waiter when a file it depends on changes;
// without inotify every wait is its timeout, and callers look
// again after each.
type Watcher struct{}

func New() *Watcher                  { return &Watcher{} }
func (w *Watcher) Entry(path string) {}
func (w *Watcher) File(path string)  {}
func (w *Watcher) Close()            {}

// Changed would report whether a watched change happened since the last
// call; without inotify it may always have.
func (w *Watcher) Changed() bool { return true }

// wait returns false once d has passed, or ctx's error when ctx ends first.
func (w *Watcher) Wait(ctx context.Context, d time.Duration) (bool, error) {
	return sleep(ctx, d)
}
