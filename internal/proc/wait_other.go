//go:build !linux

package proc

import "context"

// waitPidfd reports that there are no pidfds to wait on here.
func waitPidfd(ctx context.Context, pid int) (bool, error) { return false, nil }
