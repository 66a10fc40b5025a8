package catalog

import (
	"os/exec"
	"strings"
	"testing"
)

// The catalog knows nothing of the host, workers or transport: of this
// module it imports the protocol's types and the atomic file writer alone.
func TestImportsNothingOfTheModuleButProtocol(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH: %v", err)
	}
	const module = "github.com/agentd-dev/agentd"
	out, err := exec.Command(goBin, "list", "-deps", module+"/internal/catalog").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module+"/") {
			continue
		}
		switch pkg {
		case module + "/internal/catalog", module + "/protocol", module + "/internal/atomicfile":
		default:
			t.Errorf("catalog depends on %s", pkg)
		}
	}
}
