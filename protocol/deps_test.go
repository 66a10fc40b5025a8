package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const modulePath = "github.com/agentd-dev/agentd"

// listedPackage is what `go list -json` says of one package.
type listedPackage struct {
	ImportPath string
	Standard   bool
	Error      *struct{ Err string }
}

// goListDeps returns pkg and every package it depends on, test files
// excluded.
func goListDeps(t *testing.T, pkg string) []listedPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json", pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	var deps []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s: %s", pkg, p.ImportPath, p.Error.Err)
		}
		deps = append(deps, p)
	}
	return deps
}

func isAgentd(importPath string) bool {
	return importPath == modulePath || strings.HasPrefix(importPath, modulePath+"/")
}

// The protocol package is the wire contract: it imports the standard
// library and nothing else, of agentd or of anyone.
func TestProtocolImportsOnlyTheStandardLibrary(t *testing.T) {
	const self = modulePath + "/protocol"
	deps := goListDeps(t, self)
	for _, p := range deps {
		switch {
		case p.ImportPath == self || p.Standard:
		case isAgentd(p.ImportPath):
			t.Errorf("%s depends on %s: the protocol imports nothing else of agentd", self, p.ImportPath)
		default:
			t.Errorf("%s depends on %s: the protocol imports only the standard library", self, p.ImportPath)
		}
	}
}

// The public Go client imports only the protocol of agentd, never the host
// or anything internal.
func TestClientImportsOnlyTheProtocolOfAgentd(t *testing.T) {
	const client = modulePath + "/client"
	deps := goListDeps(t, client)
	for _, p := range deps {
		if p.ImportPath == client || p.ImportPath == modulePath+"/protocol" {
			continue
		}
		if isAgentd(p.ImportPath) {
			t.Errorf("%s depends on %s: the client imports only the protocol of agentd", client, p.ImportPath)
		}
	}
}
