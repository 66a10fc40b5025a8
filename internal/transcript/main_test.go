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
	if path := os.Getenv(holderChildEnv); path != "" {
		// Re-executed by TestAWriterInAnotherProcessIsRefusedUntilItExits.
		os.Exit(holderChild(path))
	}
	goleak.VerifyTestMain(m)
}
