package agentd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestConformanceRowsNameTestsThatExist: every row of docs/conformance.md
// that names a test names one in the package it names, so a test that
// moves or is renamed cannot leave its row pointing nowhere.
func TestConformanceRowsNameTestsThatExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^\| (\d{3}) \| (.+) \| (\./\S+|—) \| (\^Test\w+\$(?:/\S+)?|—) \|$`)
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| 0") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("a row not in the form | seed | behaviour | package | test |: %s", line)
			continue
		}
		rows++
		pkg, pattern := m[3], m[4]
		if pattern == "—" {
			continue
		}
		name := strings.TrimSuffix(strings.SplitN(strings.TrimPrefix(pattern, "^"), "$", 2)[0], "$")
		if !definesTest(t, pkg, name) {
			t.Errorf("%q maps to %s in %s, which has no such test", m[2], name, pkg)
		}
	}
	if rows == 0 {
		t.Fatal("no rows found")
	}
}

// definesTest reports whether a test file of package dir defines name.
func definesTest(t *testing.T, dir, name string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "func "+name+"(") {
			return true
		}
	}
	return false
}
