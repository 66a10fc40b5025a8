package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// vendorRecord is page/vendor/vendor.json: the npm package the vendored
// files come from, as the lockfile pins it, and each file's digest in it.
type vendorRecord struct {
	Package   string `json:"package"`
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
	Files     map[string]struct {
		From   string `json:"from"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
}

// The embedded xterm.js is the one the page's lockfile pins: the vendor
// record names the lockfile's version and integrity, and each embedded file
// has the digest the record gives it; where `npm ci` has filled
// page/node_modules, each is byte for byte the package's file. To update
// it: change package.json, npm install, copy the files to vendor/ and
// write their digests and the lockfile's integrity in vendor.json.
func TestTheEmbeddedXtermIsTheLockfilesPackage(t *testing.T) {
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	readJSON(t, "page/package-lock.json", &lock)
	var rec vendorRecord
	readJSON(t, "page/vendor/vendor.json", &rec)
	locked, ok := lock.Packages["node_modules/"+rec.Package]
	if !ok {
		t.Fatalf("the lockfile pins no %s", rec.Package)
	}
	if rec.Package != "@xterm/xterm" || rec.Version != "6.0.0" || locked.Version != rec.Version || locked.Integrity != rec.Integrity {
		t.Fatalf("vendor.json has %s %s (%s); the lockfile pins %s (%s)", rec.Package, rec.Version, rec.Integrity, locked.Version, locked.Integrity)
	}
	if len(rec.Files) != 2 {
		t.Fatalf("vendor.json names %d files, want xterm.js and xterm.css", len(rec.Files))
	}
	installed := filepath.Join("page", "node_modules", rec.Package)
	for name, f := range rec.Files {
		a, ok := pageAssets["/vendor/"+name]
		if !ok {
			t.Fatalf("%s is not served", name)
		}
		body := []byte(a.body)
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("the embedded %s has sha256 %x; vendor.json says %s", name, sum, f.SHA256)
		}
		pkg, err := os.ReadFile(filepath.Join(installed, filepath.FromSlash(f.From)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // npm ci has not run: the digests above are the check
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(pkg, body):
			t.Errorf("the embedded %s differs from %s of the installed package", name, f.From)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
