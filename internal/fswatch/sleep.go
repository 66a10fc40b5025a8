package fswatch

import (
	"context"
	"time"
)

// sleep returns false once d has passed, or ctx's error when ctx ends
// first: a wait without inotify.
func sleep(ctx context.Context, d time.Duration) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	}
}
