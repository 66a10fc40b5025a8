package credentials

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

func TestSetRemoveAndReadBack(t *testing.T) {
	home := t.TempDir()
	if err := Set(home, "openai", "sk-test-0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := Set(home, "anthropic", "sk-ant-test-0123456789"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(Path(home))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	f, err := Read(home)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Providers(), ","); got != "anthropic,openai" {
		t.Fatalf("providers %q", got)
	}
	if had, err := Remove(home, "openai"); err != nil || !had {
		t.Fatalf("remove: %v %v", had, err)
	}
	if had, err := Remove(home, "openai"); err != nil || had {
		t.Fatalf("second remove: %v %v", had, err)
	}
	if f, _ := Read(home); f.Keys["openai"] != "" || f.Keys["anthropic"] != "sk-ant-test-0123456789" {
		t.Fatalf("after remove: %v", f.Providers())
	}
}

func TestConcurrentSetsKeepEveryKey(t *testing.T) {
	home := t.TempDir()
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			if err := Set(home, n, "key-of-"+n+"-0123456789"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f, err := Read(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Keys) != len(names) {
		t.Fatalf("kept %v, want all of %v", f.Providers(), names)
	}
}

func TestBadKeysAndNamesAreRefusedWithoutQuotingTheKey(t *testing.T) {
	home := t.TempDir()
	for _, key := range []string{"", "sk-with space-secretpart", "sk-line\nbreak-secretpart", strings.Repeat("k", MaxKeyBytes+1)} {
		err := Set(home, "openai", key)
		if !errors.Is(err, ErrBadKey) {
			t.Errorf("Set(%q): %v, want ErrBadKey", key, err)
		}
		if err != nil && len(key) > 0 && strings.Contains(err.Error(), "secretpart") {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	for _, name := range []string{"", "Open AI", "a/b", "../x"} {
		if err := Set(home, name, "sk-0123456789abc"); !errors.Is(err, ErrBadProvider) {
			t.Errorf("Set(%q): %v, want ErrBadProvider", name, err)
		}
	}
}

func TestDecodeNamesWhatIsWrong(t *testing.T) {
	cases := []struct{ in, says string }{
		{`{"version":1,"keys":{"openai":"sk-0123456789"}}`, ""},
		{`{"version":2,"keys":{}}`, `"version"`},
		{`{"version":1,"keys":{},"extra":1}`, `"extra"`},
		{`{"version":1,"keys":{"openai":""}}`, `keys.openai`},
		{`{"version":1,"keys":{"Bad Name":"sk-0123456789"}}`, `"keys"`},
		{`{"version":1,"keys":{"openai":5}}`, `"keys"`},
		{`{"version":1,"keys":{}} {}`, `after the JSON`},
		{`{"version":1,"keys":{"openai":"sk-secretpart`, `cut short`},
		{``, `empty`},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.in))
		switch {
		case c.says == "" && err != nil:
			t.Errorf("Decode(%s): %v", c.in, err)
		case c.says != "" && (!errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.says)):
			t.Errorf("Decode(%s): %v; want ErrDamaged saying %s", c.in, err, c.says)
		case err != nil && strings.Contains(err.Error(), "secretpart"):
			t.Errorf("Decode(%s): the error quotes a key: %v", c.in, err)
		}
	}
}

func TestStoreSeesEveryChangeOfTheFile(t *testing.T) {
	home := t.TempDir()
	s := NewStore(home)
	if k := s.Key("openai"); k != "" {
		t.Fatalf("key %q before any was stored", k)
	}
	for _, key := range []string{"sk-first-0123456789", "sk-other-0123456789", "sk-third-0123456789"} {
		if err := Set(home, "openai", key); err != nil {
			t.Fatal(err)
		}
		if k := s.Key("openai"); k != key {
			t.Fatalf("key %q after storing %q", k, key)
		}
	}
	Remove(home, "openai")
	if k := s.Key("openai"); k != "" {
		t.Fatalf("key %q after removal", k)
	}
	os.WriteFile(Path(home), []byte("{not json"), 0o600)
	if f, err := s.Current(); !errors.Is(err, ErrDamaged) || len(f.Keys) != 0 {
		t.Fatalf("damaged file: %v %v", f.Providers(), err)
	}
}

func TestASymbolicLinkAtTheFileOrItsLockIsRefusedNotFollowed(t *testing.T) {
	home := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.json")
	content := `{"version":1,"keys":{"openai":"sk-elsewhere-0123456789"}}`
	if err := os.WriteFile(elsewhere, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, Path(home)); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(home); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Errorf("Read through a link: %v, want atomicfile.ErrSymlink", err)
	}
	if key := NewStore(home).Key("openai"); key != "" {
		t.Error("the Store read a key through a link")
	}
	if err := Set(home, "openai", "sk-mine-0123456789"); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Errorf("Set over a link: %v, want atomicfile.ErrSymlink", err)
	}

	// The lock's path too: nothing is created where it points.
	other := t.TempDir()
	if err := os.Symlink(filepath.Join(other, "created"), filepath.Join(other, lockName)); err != nil {
		t.Fatal(err)
	}
	if err := Set(other, "openai", "sk-mine-0123456789"); err == nil {
		t.Error("Set with a link at the lock's path: no error")
	}
	if _, err := os.Lstat(filepath.Join(other, "created")); err == nil {
		t.Error("the lock was created through a link")
	}
	if b, _ := os.ReadFile(elsewhere); string(b) != content {
		t.Errorf("the link's target holds %q", b)
	}
}
