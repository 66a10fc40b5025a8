//go:build !linux

package activation

import (
	"context"
	"time"
)

// changes would wake a waiting activation when a file it depends on
// changes; without inotify every wait is its timeout, and callers look
// again after each.
type changes struct{}

func newChanges() *changes           { return &changes{} }
func (w *changes) entry(path string) {}
func (w *changes) file(path string)  {}
func (w *changes) close()            {}

// wait returns false once d has passed, or ctx's error when ctx ends first.
func (w *changes) wait(ctx context.Context, d time.Duration) (bool, error) {
	return sleep(ctx, d)
}
