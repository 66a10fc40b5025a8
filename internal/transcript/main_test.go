package transcript

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(diskFullChildEnv); path != "" {
		// Re-executed by TestAppendOnAFullDiskLeavesTheFileWhole.
		os.Exit(diskFullChild(path))
	}
	goleak.VerifyTestMain(m)
}
