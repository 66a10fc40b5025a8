package home

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whatever a lock file holds, readHolder reads a positive pid or none,
// and an endpoint only beside a pid, without a line break in it.
func FuzzReadHolder(f *testing.F) {
	for _, seed := range []string{"", "123\n", "123\n/run/agentd/h1.sock\n", "-1\n/x\n", "abc", "7\n\n\n", "9\r\n/a b\n", "1\n0\n0"} {
		f.Add([]byte(seed))
	}
	path := filepath.Join(f.TempDir(), LockFileName)
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		pid, endpoint := readHolder(path)
		if pid < 0 || pid == 0 && endpoint != "" || strings.Contains(endpoint, "\n") {
			t.Fatalf("%q: pid %d endpoint %q", content, pid, endpoint)
		}
	})
}
