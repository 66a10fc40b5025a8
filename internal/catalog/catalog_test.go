package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/protocol"
)

var allocatedID = regexp.MustCompile(`^[a-z2-7]{10}$`)

func TestCreateWritesACompleteHeaderWithDefaults(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "my-project")
	before := time.Now()
	h := mustCreate(t, c, CreateOptions{Cwd: cwd})

	if !allocatedID.MatchString(h.ID) {
		t.Errorf("id %q is not 10 characters of lowercase base32", h.ID)
	}
	want := Header{
		SchemaVersion: SchemaVersion, ID: h.ID, Title: "", Cwd: cwd, // titled by its first prompt
		Thinking: ThinkingOff, Approval: ApprovalAsk, Sandbox: protocol.SandboxWorkspace, Network: protocol.NetworkOn, MetadataRevision: 1,
		CreatedAt: h.CreatedAt, UpdatedAt: h.CreatedAt, LastActivityAt: h.CreatedAt,
	}
	if !sameHeader(h, want) {
		t.Errorf("Create = %+v, want %+v", h, want)
	}
	if h.CreatedAt.Before(before.Add(-time.Second)) || h.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("CreatedAt = %v, want about now", h.CreatedAt)
	}
	got, err := c.Get(h.ID)
	if err != nil || !sameHeader(got, h) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, h)
	}

	dir := filepath.Join(home, "sessions", h.ID)
	if c.Dir(h.ID) != dir {
		t.Errorf("Dir = %s, want %s", c.Dir(h.ID), dir)
	}
	if want := filepath.Join(dir, "transcript.jsonl"); c.TranscriptPath(h.ID) != want {
		t.Errorf("TranscriptPath = %s, want %s", c.TranscriptPath(h.ID), want)
	}
	assertMode(t, filepath.Join(home, "sessions"), 0o700)
	assertMode(t, dir, 0o700)
	assertMode(t, filepath.Join(dir, "header.json"), 0o600)
	assertNotExist(t, c.TranscriptPath(h.ID))
	if names := sessionsDirNames(t, home); !slices.Equal(names, []string{h.ID}) {
		t.Errorf("sessions directory holds %v, want only %s", names, h.ID)
	}
	b, err := os.ReadFile(filepath.Join(dir, "header.json"))
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := decodeHeader(b)
	if err != nil || !sameHeader(onDisk, h) {
		t.Errorf("header.json decodes to %+v, %v; want %+v", onDisk, err, h)
	}
}

func TestCreateKeepsTheOptionsItIsGiven(t *testing.T) {
	c, _ := openHome(t)
	cwd := workDir(t, "w")
	h := mustCreate(t, c, CreateOptions{
		ID: "demo-1", Cwd: cwd + "/./", Title: "  Fix the build  ",
		Model: "anthropic/claude-opus-4-6", Thinking: ThinkingHigh, Approval: ApprovalReadOnly,
		Sandbox: protocol.SandboxReadOnly, Network: protocol.NetworkOff,
	})
	if h.ID != "demo-1" || h.Cwd != cwd || h.Title != "Fix the build" ||
		h.Model != "anthropic/claude-opus-4-6" || h.Thinking != "high" || h.Approval != "read-only" ||
		h.Sandbox != "read-only" || h.Network != "off" {
		t.Errorf("Create = %+v", h)
	}
}

func TestASandboxThatIsNoneOrANetworkOffWithoutOneIsRefusedByName(t *testing.T) {
	c, _ := openHome(t)
	for _, tc := range []struct{ sandbox, network, field string }{
		{"none", "", "sandbox"},
		{"", "maybe", "network"},
		{protocol.SandboxFull, protocol.NetworkOff, "network"},
	} {
		_, err := c.Create(CreateOptions{Cwd: workDir(t, "w"), Sandbox: tc.sandbox, Network: tc.network})
		var bad *InvalidError
		if !errors.As(err, &bad) || bad.Field != tc.field {
			t.Errorf("Create with sandbox %q and network %q: %v; want an invalid %s", tc.sandbox, tc.network, err, tc.field)
		}
	}
}

func TestAHeaderWrittenBeforeSandboxesReadsAsWorkspaceWithTheNetworkOn(t *testing.T) {
	h, err := decodeHeader([]byte(`{"schemaVersion":1,"id":"old-1","title":"w","cwd":"/w","thinking":"off","approval":"ask",` +
		`"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z","lastActivityAt":"2026-01-02T03:04:05Z","metadataRevision":1}`))
	if err != nil || h.Sandbox != protocol.SandboxWorkspace || h.Network != protocol.NetworkOn {
		t.Fatalf("decodeHeader = %+v, %v; want sandbox workspace, network on", h, err)
	}
}

func TestHeaderConvertsToTheProtocolSession(t *testing.T) {
	c, _ := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: "demo-1", Cwd: workDir(t, "w"), Model: "faux/echo"})
	got := h.Session("idle")
	want := protocol.Session{
		SessionID: "demo-1", Title: "", Cwd: h.Cwd, Model: "faux/echo", Thinking: "off", Approval: "ask",
		Sandbox: "workspace", Network: "on",
		CreatedAt: h.CreatedAt, LastActivityAt: h.LastActivityAt, Status: "idle",
		MetadataRevision: 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Session = %+v, want %+v", got, want)
	}
	if !(Header{ID: "x", Damaged: true, Damage: "bad"}).Session("").Damaged {
		t.Error("a damaged header converts to a session that is not damaged")
	}
}

func TestChangesBumpTheRevisionAndPersistBeforeReturning(t *testing.T) {
	c, home := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: "s1", Cwd: workDir(t, "w")})
	later := h.LastActivityAt.Add(time.Minute)
	steps := []struct {
		name  string
		do    func() (Header, error)
		check func(Header) bool
	}{
		{"rename", func() (Header, error) { return c.Rename("s1", "New title") }, func(h Header) bool { return h.Title == "New title" }},
		{"set model", func() (Header, error) { return c.SetModel("s1", "openai/gpt-5") }, func(h Header) bool { return h.Model == "openai/gpt-5" }},
		{"set thinking", func() (Header, error) { return c.SetThinking("s1", "medium") }, func(h Header) bool { return h.Thinking == "medium" }},
		{"set approval", func() (Header, error) { return c.SetApproval("s1", "all") }, func(h Header) bool { return h.Approval == "all" }},
		{"touch", func() (Header, error) { return c.Touch("s1", later) }, func(h Header) bool { return h.LastActivityAt.Equal(later) }},
		{"archive", func() (Header, error) { return c.Archive("s1") }, func(h Header) bool { return h.Archived }},
		{"unarchive", func() (Header, error) { return c.Unarchive("s1") }, func(h Header) bool { return !h.Archived }},
	}
	rev := h.MetadataRevision
	updated := h.UpdatedAt
	for _, s := range steps {
		got, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		rev++
		if got.MetadataRevision != rev || !s.check(got) || got.UpdatedAt.Before(updated) {
			t.Fatalf("%s: header %+v; want revision %d and the change", s.name, got, rev)
		}
		updated = got.UpdatedAt
		// On disk before the call returned: a new catalog reads it.
		again, err := mustOpen(t, home).Get("s1")
		if err != nil || !sameHeader(again, got) {
			t.Fatalf("%s: reopened header %+v, %v; want %+v", s.name, again, err, got)
		}
	}
}

func TestChangesOfNothingAreNotCounted(t *testing.T) {
	c, _ := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: "s1", Cwd: workDir(t, "w"), Title: "T", Model: "faux/a"})
	for name, do := range map[string]func() (Header, error){
		"same title":               func() (Header, error) { return c.Rename("s1", " T ") },
		"same model":               func() (Header, error) { return c.SetModel("s1", "faux/a") },
		"same thinking":            func() (Header, error) { return c.SetThinking("s1", "off") },
		"same approval":            func() (Header, error) { return c.SetApproval("s1", "ask") },
		"touch at an older time":   func() (Header, error) { return c.Touch("s1", h.LastActivityAt.Add(-time.Hour)) },
		"touch at the same time":   func() (Header, error) { return c.Touch("s1", h.LastActivityAt) },
		"unarchive a live session": func() (Header, error) { return c.Unarchive("s1") },
	} {
		got, err := do()
		if err != nil || got.MetadataRevision != 1 {
			t.Errorf("%s: revision %d, err %v; want 1 and nil", name, got.MetadataRevision, err)
		}
	}
}

func TestArchivedSessionsAreListedOnRequestAndRefuseChanges(t *testing.T) {
	c, _ := openHome(t)
	cwd := workDir(t, "w")
	mustCreate(t, c, CreateOptions{ID: "live", Cwd: cwd})
	mustCreate(t, c, CreateOptions{ID: "old", Cwd: cwd})
	if _, err := c.Archive("old"); err != nil {
		t.Fatal(err)
	}
	if got := ids(c.List(ListOptions{})); !slices.Equal(got, []string{"live"}) {
		t.Errorf("List() = %v, want [live]", got)
	}
	if got := ids(c.List(ListOptions{IncludeArchived: true})); len(got) != 2 {
		t.Errorf("List(IncludeArchived) = %v, want both", got)
	}
	for name, do := range map[string]func() error{
		"rename":       func() error { _, err := c.Rename("old", "x"); return err },
		"archive":      func() error { _, err := c.Archive("old"); return err },
		"touch":        func() error { _, err := c.Touch("old", time.Now().Add(time.Hour)); return err },
		"set model":    func() error { _, err := c.SetModel("old", "faux/b"); return err },
		"set thinking": func() error { _, err := c.SetThinking("old", "low"); return err },
		"set approval": func() error { _, err := c.SetApproval("old", "all"); return err },
	} {
		err := do()
		if !errors.Is(err, ErrArchived) || !strings.Contains(err.Error(), "old") {
			t.Errorf("%s: err = %v, want ErrArchived naming the session", name, err)
		}
	}
	if h, _ := c.Get("old"); h.MetadataRevision != 2 {
		t.Errorf("refused changes counted: revision %d, want 2", h.MetadataRevision)
	}
	if _, err := c.Resolve("ol"); err != nil {
		t.Errorf("an archived session is not selectable: %v", err)
	}
	if _, err := c.Unarchive("old"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rename("old", "back"); err != nil {
		t.Errorf("rename after unarchive: %v", err)
	}
}

func TestRemoveDeletesTheSessionFolder(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "w")
	h := mustCreate(t, c, CreateOptions{Cwd: cwd})
	keep := mustCreate(t, c, CreateOptions{Cwd: cwd})
	if err := os.WriteFile(c.TranscriptPath(h.ID), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Archive(h.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(h.ID); err != nil {
		t.Fatalf("Remove of an archived session: %v", err)
	}
	assertNotExist(t, c.Dir(h.ID))
	if names := sessionsDirNames(t, home); !slices.Equal(names, []string{keep.ID}) {
		t.Errorf("sessions directory holds %v, want only %s", names, keep.ID)
	}
	if _, err := c.Get(h.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove: err = %v, want ErrNotFound", err)
	}
	if err := c.Remove(h.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: err = %v, want ErrNotFound", err)
	}
	if got := ids(mustOpen(t, home).List(ListOptions{IncludeArchived: true})); !slices.Equal(got, []string{keep.ID}) {
		t.Errorf("reopened List = %v, want [%s]", got, keep.ID)
	}
	// The id is free again.
	mustCreate(t, c, CreateOptions{ID: h.ID, Cwd: cwd})
}

func TestRemoveOfAFolderDeletedBehindTheCatalogsBack(t *testing.T) {
	c, _ := openHome(t)
	h := mustCreate(t, c, CreateOptions{Cwd: workDir(t, "w")})
	if err := os.RemoveAll(c.Dir(h.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rename(h.ID, "x"); err == nil || !strings.Contains(err.Error(), h.ID) {
		t.Errorf("Rename of a vanished folder: err = %v, want one naming %s", err, h.ID)
	}
	if err := c.Remove(h.ID); err != nil {
		t.Errorf("Remove of a vanished folder: %v", err)
	}
}

func TestReopenPreservesEverything(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "w")
	base := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for i := range 5 {
		h := mustCreate(t, c, CreateOptions{Cwd: cwd, Title: fmt.Sprintf("session %d", i), Model: "faux/m"})
		if _, err := c.Touch(h.ID, base.Add(time.Duration(i%3)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 1:
			c.SetModel(h.ID, "anthropic/claude-sonnet-4-5")
			c.SetThinking(h.ID, "low")
		case 2:
			c.Archive(h.ID)
		case 3:
			c.SetApproval(h.ID, "read-only")
			c.Rename(h.ID, "renamed")
		}
	}
	if _, err := c.SetDefaultModel("openai/gpt-5"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecordSelectedModel("anthropic/claude-opus-4-6"); err != nil {
		t.Fatal(err)
	}
	want := c.List(ListOptions{IncludeArchived: true})

	again := mustOpen(t, home)
	assertSameHeaders(t, again.List(ListOptions{IncludeArchived: true}), want)
	if got, want := again.Settings(), c.Settings(); got != want {
		t.Errorf("reopened Settings = %+v, want %+v", got, want)
	}
}

func TestListOrdersByLastActivityThenID(t *testing.T) {
	c, _ := openHome(t)
	cwd := workDir(t, "w")
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for id, at := range map[string]time.Time{
		"b": t0.Add(time.Hour), "a": t0.Add(time.Hour), "c": t0.Add(2 * time.Hour), "d": t0,
	} {
		mustCreate(t, c, CreateOptions{ID: id, Cwd: cwd})
		if _, err := c.Touch(id, at); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(c.List(ListOptions{})); !slices.Equal(got, []string{"c", "a", "b", "d"}) {
		t.Errorf("List = %v, want [c a b d]", got)
	}
	// A page goes on after a place in that order, whether or not a
	// session is still there.
	for _, tc := range []struct {
		after ListPlace
		limit int
		want  []string
	}{
		{ListPlace{t0.Add(2 * time.Hour).UnixNano(), "c"}, 2, []string{"a", "b"}},
		{ListPlace{t0.Add(time.Hour).UnixNano(), "a"}, 0, []string{"b", "d"}},
		{ListPlace{t0.Add(time.Hour).UnixNano(), "aa"}, 5, []string{"b", "d"}},
		{ListPlace{t0.Add(90 * time.Minute).UnixNano(), "zz"}, 1, []string{"a"}},
		{ListPlace{t0.UnixNano(), "d"}, 0, nil},
	} {
		if got := ids(c.List(ListOptions{After: &tc.after, Limit: tc.limit})); !slices.Equal(got, tc.want) {
			t.Errorf("List after %+v, limit %d = %v, want %v", tc.after, tc.limit, got, tc.want)
		}
	}
}

// Seed 002: "rejects a duplicate session ID within one durable repository".
func TestCreatingASessionWithAnIDInUseFails(t *testing.T) {
	c, home := openHome(t)
	first := mustCreate(t, c, CreateOptions{ID: "demo-1", Cwd: workDir(t, "one"), Title: "first"})

	_, err := c.Create(CreateOptions{ID: "demo-1", Cwd: workDir(t, "other-cwd"), Title: "second"})
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), "demo-1") {
		t.Fatalf("second Create: err = %v, want ErrDuplicate naming demo-1", err)
	}
	if got, _ := c.Get("demo-1"); !sameHeader(got, first) {
		t.Errorf("the first session changed: %+v, want %+v", got, first)
	}
	// The rule holds for sessions found on disk too.
	again := mustOpen(t, home)
	if _, err := again.Create(CreateOptions{ID: "demo-1", Cwd: workDir(t, "third")}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Create after reopening: err = %v, want ErrDuplicate", err)
	}
	if got := again.List(ListOptions{}); len(got) != 1 || got[0].Title != "first" {
		t.Errorf("List = %+v, want the first session alone", got)
	}
}

func TestConcurrentCreatesOfOneIDMakeOneSession(t *testing.T) {
	c, home := openHome(t)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cwd := workDir(t, fmt.Sprintf("w%d", i))
		wg.Go(func() {
			_, errs[i] = c.Create(CreateOptions{ID: "race", Cwd: cwd, Title: fmt.Sprintf("t%d", i)})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrDuplicate):
			t.Errorf("a losing Create failed with %v, want ErrDuplicate", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d Creates won, want exactly 1", won)
	}
	if names := sessionsDirNames(t, home); !slices.Equal(names, []string{"race"}) {
		t.Errorf("sessions directory holds %v, want only race", names)
	}
	h, _ := c.Get("race")
	if again, err := mustOpen(t, home).Get("race"); err != nil || !sameHeader(again, h) {
		t.Errorf("reopened %+v, %v; want the winner %+v", again, err, h)
	}
}

func TestConcurrentCreatesAllocateDistinctIDs(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "w")
	const n = 200
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h, err := c.Create(CreateOptions{Cwd: cwd})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = h.ID
		})
	}
	wg.Wait()
	slices.Sort(got)
	if len(slices.Compact(got)) != n {
		t.Errorf("ids are not distinct")
	}
	if names := sessionsDirNames(t, home); len(names) != n {
		t.Errorf("sessions directory holds %d names, want %d", len(names), n)
	}
}

func TestAnAllocatedIDThatCollidesIsDrawnAgain(t *testing.T) {
	c, _ := openHome(t)
	cwd := workDir(t, "w")
	draws := []string{"aaaaaaaaaa", "aaaaaaaaaa", "bbbbbbbbbb"}
	c.newID = func() string { id := draws[0]; draws = draws[1:]; return id }
	if h := mustCreate(t, c, CreateOptions{Cwd: cwd}); h.ID != "aaaaaaaaaa" {
		t.Fatalf("first id %s", h.ID)
	}
	if h := mustCreate(t, c, CreateOptions{Cwd: cwd}); h.ID != "bbbbbbbbbb" {
		t.Errorf("second id %s, want the third draw", h.ID)
	}
}

// Seed 002: "reports missing and ambiguous session selections".
func TestReportsMissingAndAmbiguousSessionSelections(t *testing.T) {
	c, _ := openHome(t)
	cwd := workDir(t, "w")
	for _, s := range []struct{ id, title string }{
		{"demo-1", "first demo"}, {"demo-2", "second demo"}, {"other", "other work"},
		{"ab", "short"}, {"abc", "longer"},
	} {
		mustCreate(t, c, CreateOptions{ID: s.id, Cwd: cwd, Title: s.title})
	}
	for selector, want := range map[string]string{
		"demo-1": "demo-1", "demo-2": "demo-2", "o": "other", "oth": "other",
		"ab": "ab", "abc": "abc", // an exact id wins over a longer one it prefixes
	} {
		h, err := c.Resolve(selector)
		if err != nil || h.ID != want {
			t.Errorf("Resolve(%q) = %s, %v; want %s", selector, h.ID, err, want)
		}
	}

	_, err := c.Resolve("missing")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, ErrNotFound) || nf.Selector != "missing" ||
		!strings.Contains(err.Error(), "missing") {
		t.Errorf("Resolve(missing): err = %v, want a NotFoundError naming it", err)
	}

	_, err = c.Resolve("demo")
	var amb *AmbiguousError
	if !errors.As(err, &amb) || !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Resolve(demo): err = %v, want an AmbiguousError", err)
	}
	if got := ids(amb.Candidates); len(got) != 2 || !slices.Contains(got, "demo-1") || !slices.Contains(got, "demo-2") {
		t.Errorf("candidates %v, want demo-1 and demo-2", got)
	}
	for _, s := range []string{`"demo"`, "demo-1 (first demo, in w)", "demo-2 (second demo, in w)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not contain %q", err, s)
		}
	}

	if _, err := c.Resolve(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve(\"\"): err = %v, want ErrInvalid", err)
	}
	if _, err := c.Get("demo"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get takes a whole id: Get(demo) err = %v, want ErrNotFound", err)
	}
}

func TestAnAmbiguousMessageBoundsTheCandidatesItNames(t *testing.T) {
	var hs []Header
	for i := range 25 {
		hs = append(hs, Header{ID: fmt.Sprintf("s%02d", i), Title: "t"})
	}
	msg := (&AmbiguousError{Selector: "s", Candidates: hs}).Error()
	if !strings.Contains(msg, "25 sessions") || !strings.Contains(msg, "and 15 more") || strings.Contains(msg, "s10") {
		t.Errorf("message %q", msg)
	}
}

func TestConcurrentChangesAndReadsStayConsistent(t *testing.T) {
	c, home := openHome(t)
	cwd := workDir(t, "w")
	var sessions []string
	for range 4 {
		sessions = append(sessions, mustCreate(t, c, CreateOptions{Cwd: cwd}).ID)
	}
	const perWriter = 10
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 8 {
		id := sessions[w%len(sessions)]
		wg.Go(func() {
			for i := range perWriter {
				var err error
				if i%2 == 0 {
					_, err = c.Rename(id, fmt.Sprintf("writer %d step %d", w, i))
				} else {
					_, err = c.Touch(id, base.Add(time.Duration(w*perWriter+i)*time.Second))
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got := c.List(ListOptions{}); len(got) != len(sessions) {
					t.Errorf("List has %d sessions, want %d", len(got), len(sessions))
				}
				c.Resolve(sessions[0][:3])
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	for _, h := range c.List(ListOptions{}) {
		// Two writers per session: each of their renames changes the
		// title, and the later writer's touches are all newer than any
		// of the earlier's, so each of them counts.
		if want := uint64(1 + perWriter + perWriter/2); h.MetadataRevision < want {
			t.Errorf("%s: revision %d, want at least %d", h.ID, h.MetadataRevision, want)
		}
	}
	assertSameHeaders(t, mustOpen(t, home).List(ListOptions{}), c.List(ListOptions{}))
}

func TestRemoveRacingChangesLeavesNoSessionBehind(t *testing.T) {
	c, home := openHome(t)
	h := mustCreate(t, c, CreateOptions{Cwd: workDir(t, "w")})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20 {
				_, err := c.Rename(h.ID, fmt.Sprintf("w%d-%d", w, i))
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("Rename: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		if err := c.Remove(h.ID); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	wg.Wait()
	if _, err := c.Get(h.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove: %v", err)
	}
	if names := sessionsDirNames(t, home); len(names) != 0 {
		t.Errorf("sessions directory holds %v, want nothing", names)
	}
}

// TestASessionIsTitledFromItsFirstPrompt: an untitled session takes a
// short title of one line from its first prompt, and keeps it; a session
// titled at its creation keeps its own.
func TestASessionIsTitledFromItsFirstPrompt(t *testing.T) {
	c, home := openHome(t)
	h := mustCreate(t, c, CreateOptions{ID: "s1", Cwd: workDir(t, "proj")})
	if h.Label() != "untitled, in proj" {
		t.Errorf("label %q", h.Label())
	}
	if _, titled, err := c.TitleFromPrompt("s1", "  \n\t\n"); titled || err != nil {
		t.Fatalf("a blank prompt: titled %v, %v", titled, err)
	}
	h, titled, err := c.TitleFromPrompt("s1", "\n  fix   the failing\ttest in catalog\nand then the docs")
	if !titled || err != nil || h.Title != "fix the failing test in catalog" {
		t.Fatalf("TitleFromPrompt = %q, %v, %v", h.Title, titled, err)
	}
	if h, titled, _ := c.TitleFromPrompt("s1", "another prompt"); titled || h.Title != "fix the failing test in catalog" {
		t.Fatalf("a second prompt retitled the session: %q", h.Title)
	}
	if got, _ := mustOpen(t, home).Get("s1"); got.Title != "fix the failing test in catalog" || got.Label() != "fix the failing test in catalog, in proj" {
		t.Fatalf("reopened: %q (%s)", got.Title, got.Label())
	}
	mustCreate(t, c, CreateOptions{ID: "s2", Cwd: workDir(t, "w"), Title: "given"})
	if h, titled, _ := c.TitleFromPrompt("s2", "a prompt"); titled || h.Title != "given" {
		t.Fatalf("a given title was replaced: %q", h.Title)
	}
}

func TestTitleFromPromptIsShortAndOnOneLine(t *testing.T) {
	for _, c := range []struct{ prompt, want string }{
		{"list the files here: run `ls -la`", "list the files here: run `ls -la`"},
		{"", ""},
		{"\x1b[31mred\x1b[0m alert", "[31mred [0m alert"},
		{strings.Repeat("word ", 30), "word word word word word word word word word word word…"},
		{strings.Repeat("x", 80), strings.Repeat("x", PromptTitleLen-1) + "…"},
		{strings.Repeat("é", 70), strings.Repeat("é", PromptTitleLen-1) + "…"},
	} {
		got := TitleFromPrompt(c.prompt)
		if got != c.want || utf8.RuneCountInString(got) > PromptTitleLen || strings.ContainsAny(got, "\n\t") {
			t.Errorf("TitleFromPrompt(%q) = %q, want %q", c.prompt, got, c.want)
		}
	}
}

func TestASessionKeepsItsPluginPackagesAcrossOpens(t *testing.T) {
	c, home := openHome(t)
	h := mustCreate(t, c, CreateOptions{Cwd: workDir(t, "w"), Plugins: []string{"/kits/a", "/kits/b"}})
	if !slices.Equal(h.Plugins, []string{"/kits/a", "/kits/b"}) || !slices.Equal(h.Session("idle").Plugins, h.Plugins) {
		t.Fatalf("created %+v", h)
	}
	h2, err := c.SetPlugins(h.ID, []string{"/kits/c"})
	if err != nil || h2.MetadataRevision != 2 {
		t.Fatalf("SetPlugins: %+v %v", h2, err)
	}
	if again, err := c.SetPlugins(h.ID, []string{"/kits/c"}); err != nil || again.MetadataRevision != 2 {
		t.Fatalf("SetPlugins to the same: %+v %v", again, err)
	}
	got, err := mustOpen(t, home).Get(h.ID)
	if err != nil || !slices.Equal(got.Plugins, []string{"/kits/c"}) {
		t.Fatalf("reopened: %+v %v", got, err)
	}
	if h3, err := c.SetPlugins(h.ID, nil); err != nil || h3.Plugins != nil {
		t.Fatalf("SetPlugins none: %+v %v", h3, err)
	}
	b, _ := os.ReadFile(filepath.Join(home, "sessions", h.ID, "header.json"))
	if bytes.Contains(b, []byte("plugins")) {
		t.Fatalf("a session without packages writes them:\n%s", b)
	}
}

func TestPluginPackagesThatAreWrongAreRefusedByName(t *testing.T) {
	c, _ := openHome(t)
	h := mustCreate(t, c, CreateOptions{Cwd: workDir(t, "w")})
	for _, dirs := range [][]string{{"kit"}, {"/a", "/a"}, {"/a/"}} {
		_, err := c.Create(CreateOptions{Cwd: workDir(t, "w"), Plugins: dirs})
		var ie *InvalidError
		if !errors.As(err, &ie) || !strings.HasPrefix(ie.Field, "plugins[") {
			t.Errorf("Create with plugins %q: %v; want an invalid plugins[i]", dirs, err)
		}
		if _, err := c.SetPlugins(h.ID, dirs); !errors.As(err, &ie) {
			t.Errorf("SetPlugins %q: %v; want an invalid plugins[i]", dirs, err)
		}
	}
}

func TestAHeaderWrittenBeforePluginPackagesReadsWithNone(t *testing.T) {
	h, err := decodeHeader([]byte(`{"schemaVersion":1,"id":"old-1","title":"w","cwd":"/w","thinking":"off","approval":"ask",` +
		`"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z","lastActivityAt":"2026-01-02T03:04:05Z","metadataRevision":1}`))
	if err != nil || h.Plugins != nil {
		t.Fatalf("decodeHeader = %+v, %v; want no plugins", h, err)
	}
	if _, err := decodeHeader([]byte(`{"schemaVersion":1,"id":"old-1","title":"w","cwd":"/w","thinking":"off","approval":"ask","plugins":["rel"],` +
		`"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z","lastActivityAt":"2026-01-02T03:04:05Z","metadataRevision":1}`)); err == nil {
		t.Fatal("a header with a relative plugin directory decodes")
	}
}
