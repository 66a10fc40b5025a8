package transcript

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// appendTurns appends turns of six records each, of varied sizes, and
// returns the line length of every record (newline included), by seq-1.
func appendTurns(t *testing.T, l *Log, turns int) []int {
	t.Helper()
	var sizes []int
	add := func(typ, turn string, data any) {
		rec := mustAppend(t, l, typ, turn, data)
		line, err := encodeLine(nil, rec.Seq, rec.Time, rec.Type, rec.TurnID, rec.Data)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(line))
	}
	for k := range turns {
		turn := fmt.Sprintf("t%d", k)
		add(TypeTurnStart, turn, map[string]int{"k": k})
		add("user_message", turn, map[string]string{"text": strings.Repeat("u", 10*k)})
		add("assistant_message", turn, map[string]string{"text": strings.Repeat("a", 37*(k%7))})
		add("tool_call", turn, map[string]string{"cmd": "ls"})
		add("tool_result", turn, map[string]string{"out": strings.Repeat("o", 90*(k%3))})
		add(TypeTurnEnd, turn, map[string]int{"k": k})
	}
	return sizes
}

func seqOf(t *testing.T, raw json.RawMessage) uint64 {
	t.Helper()
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("page record %q: %v", raw, err)
	}
	return r.Seq
}

// checkPage checks a page's shape: ascending, consecutive records matching
// FirstSeq..LastSeq, RawBytes their lines' length, within maxBytes unless a
// single record.
func checkPage(t *testing.T, p Page, maxBytes int) {
	t.Helper()
	if len(p.Records) == 0 {
		if p.FirstSeq != 0 || p.LastSeq != 0 || p.RawBytes != 0 {
			t.Fatalf("empty page %+v", p)
		}
		return
	}
	raw := 0
	for i, r := range p.Records {
		if got := seqOf(t, r); got != p.FirstSeq+uint64(i) {
			t.Fatalf("page %d..%d: record %d has seq %d", p.FirstSeq, p.LastSeq, i, got)
		}
		raw += len(r) + 1
	}
	if p.LastSeq != p.FirstSeq+uint64(len(p.Records))-1 {
		t.Fatalf("page %d..%d holds %d records", p.FirstSeq, p.LastSeq, len(p.Records))
	}
	if p.RawBytes != raw {
		t.Fatalf("page %d..%d: RawBytes %d, lines %d", p.FirstSeq, p.LastSeq, p.RawBytes, raw)
	}
	if p.RawBytes > maxBytes && len(p.Records) != 1 {
		t.Fatalf("page %d..%d: %d bytes over maxBytes %d", p.FirstSeq, p.LastSeq, p.RawBytes, maxBytes)
	}
}

// pageAll pages from req until NextCursor is "", returning the seqs in the
// order read.
func pageAll(t *testing.T, l *Log, req PageRequest, sizes []int) []uint64 {
	t.Helper()
	var seqs []uint64
	for range 100000 {
		p, err := l.Page(req)
		if err != nil {
			t.Fatalf("Page(%+v): %v", req, err)
		}
		checkPage(t, p, req.MaxBytes)
		page := make([]uint64, 0, len(p.Records))
		for s := p.FirstSeq; s <= p.LastSeq && s != 0; s++ {
			page = append(page, s)
		}
		// A page holds as many records as fit.
		if p.NextCursor != "" && sizes != nil {
			next := p.LastSeq + 1
			if req.Direction == DirectionOlder {
				next = p.FirstSeq - 1
			}
			if p.RawBytes+sizes[next-1] <= req.MaxBytes {
				t.Fatalf("page %d..%d (%d bytes) stops before seq %d of %d bytes, maxBytes %d",
					p.FirstSeq, p.LastSeq, p.RawBytes, next, sizes[next-1], req.MaxBytes)
			}
		}
		if req.Direction == DirectionOlder {
			for i := len(page) - 1; i >= 0; i-- {
				seqs = append(seqs, page[i])
			}
		} else {
			seqs = append(seqs, page...)
		}
		if p.NextCursor == "" {
			return seqs
		}
		req.Cursor = p.NextCursor
	}
	t.Fatal("paging never ended")
	return nil
}

func wantSeqs(from, to uint64) []uint64 {
	var s []uint64
	if from <= to {
		for i := from; i <= to; i++ {
			s = append(s, i)
		}
	} else {
		for i := from; i >= to; i-- {
			s = append(s, i)
		}
	}
	return s
}

func TestPagingCoversEveryRecordExactlyOnce(t *testing.T) {
	l := openLog(t, newPath(t))
	sizes := appendTurns(t, l, 20)
	last := l.Last()
	for _, dir := range []string{DirectionOlder, DirectionNewer} {
		for _, maxBytes := range []int{1, 100, 150, 333, 1000, 4096, 1 << 20} {
			t.Run(fmt.Sprintf("%s by %d bytes", dir, maxBytes), func(t *testing.T) {
				got := pageAll(t, l, PageRequest{Direction: dir, MaxBytes: maxBytes}, sizes)
				want := wantSeqs(1, last)
				if dir == DirectionOlder {
					want = wantSeqs(last, 1)
				}
				if !equalSeqs(got, want) {
					t.Fatalf("read %v\nwant %v", got, want)
				}
			})
		}
	}
}

func TestPageFromAnAnchorAndThroughASequence(t *testing.T) {
	l := openLog(t, newPath(t))
	appendTurns(t, l, 5) // 30 records
	big := 1 << 20
	cases := []struct {
		name        string
		req         PageRequest
		first, last uint64
		through     uint64
		more        bool
	}{
		{"older from the newest", PageRequest{Direction: DirectionOlder, MaxBytes: big}, 1, 30, 30, false},
		{"newer from the oldest", PageRequest{Direction: DirectionNewer, MaxBytes: big}, 1, 30, 30, false},
		{"older from an anchor", PageRequest{Direction: DirectionOlder, AnchorSequence: 10, MaxBytes: big}, 1, 10, 30, false},
		{"newer from an anchor", PageRequest{Direction: DirectionNewer, AnchorSequence: 10, MaxBytes: big}, 10, 30, 30, false},
		{"newer through a sequence", PageRequest{Direction: DirectionNewer, ThroughSequence: 12, MaxBytes: big}, 1, 12, 12, false},
		{"newer from an anchor through a sequence", PageRequest{Direction: DirectionNewer, AnchorSequence: 7, ThroughSequence: 12, MaxBytes: big}, 7, 12, 12, false},
		{"older through a sequence", PageRequest{Direction: DirectionOlder, ThroughSequence: 12, MaxBytes: big}, 1, 12, 12, false},
		{"older from an anchor past the through sequence", PageRequest{Direction: DirectionOlder, AnchorSequence: 20, ThroughSequence: 12, MaxBytes: big}, 1, 12, 12, false},
		{"a through sequence past the end", PageRequest{Direction: DirectionNewer, ThroughSequence: 99, MaxBytes: big}, 1, 30, 30, false},
		{"older from an anchor past the end", PageRequest{Direction: DirectionOlder, AnchorSequence: 99, MaxBytes: big}, 1, 30, 30, false},
		{"newer from an anchor past the end", PageRequest{Direction: DirectionNewer, AnchorSequence: 31, MaxBytes: big}, 0, 0, 30, false},
		{"newer from an anchor past the through sequence", PageRequest{Direction: DirectionNewer, AnchorSequence: 13, ThroughSequence: 12, MaxBytes: big}, 0, 0, 12, false},
		{"one record newer", PageRequest{Direction: DirectionNewer, AnchorSequence: 5, MaxBytes: 1}, 5, 5, 30, true},
		{"one record older", PageRequest{Direction: DirectionOlder, AnchorSequence: 5, MaxBytes: 1}, 5, 5, 30, true},
		{"the first record older", PageRequest{Direction: DirectionOlder, AnchorSequence: 1, MaxBytes: 1}, 1, 1, 30, false},
		{"the last record through newer", PageRequest{Direction: DirectionNewer, AnchorSequence: 12, ThroughSequence: 12, MaxBytes: 1}, 12, 12, 12, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := l.Page(c.req)
			if err != nil {
				t.Fatal(err)
			}
			checkPage(t, p, c.req.MaxBytes)
			if p.FirstSeq != c.first || p.LastSeq != c.last || p.ThroughSeq != c.through || (p.NextCursor != "") != c.more {
				t.Errorf("page %d..%d through %d, next %q; want %d..%d through %d, more %v",
					p.FirstSeq, p.LastSeq, p.ThroughSeq, p.NextCursor, c.first, c.last, c.through, c.more)
			}
		})
	}
}

func TestAnOlderCursorWithALowerThroughSequence(t *testing.T) {
	l := openLog(t, newPath(t))
	appendTurns(t, l, 5)
	p, err := l.Page(PageRequest{Direction: DirectionNewer, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The cursor points at seq 2; read older through seq 1.
	p, err = l.Page(PageRequest{Direction: DirectionOlder, Cursor: p.NextCursor, ThroughSequence: 1, MaxBytes: 1 << 20})
	if err != nil || p.FirstSeq != 1 || p.LastSeq != 1 {
		t.Fatalf("page %d..%d, %v; want 1..1", p.FirstSeq, p.LastSeq, err)
	}
}

func TestPageEndsAtTurnBoundary(t *testing.T) {
	l := openLog(t, newPath(t))
	appendTurns(t, l, 3) // turns at 1-6, 7-12, 13-18
	mustAppend(t, l, TypeTurnStart, "t3", 1)
	mustAppend(t, l, "user_message", "t3", 1) // 20: the last record, mid-turn
	big := 1 << 20
	cases := []struct {
		name string
		req  PageRequest
		want bool
	}{
		{"older reaching the first record", PageRequest{Direction: DirectionOlder, AnchorSequence: 3, MaxBytes: big}, true},
		{"older stopping at a turn start", PageRequest{Direction: DirectionOlder, AnchorSequence: 7, MaxBytes: 1}, true},
		{"older stopping mid-turn", PageRequest{Direction: DirectionOlder, AnchorSequence: 8, MaxBytes: 1}, false},
		{"newer stopping at a turn end", PageRequest{Direction: DirectionNewer, AnchorSequence: 12, MaxBytes: 1}, true},
		{"newer stopping mid-turn", PageRequest{Direction: DirectionNewer, AnchorSequence: 11, MaxBytes: 1}, false},
		{"newer reaching the last record", PageRequest{Direction: DirectionNewer, AnchorSequence: 19, MaxBytes: big}, true},
		{"newer reaching the through sequence", PageRequest{Direction: DirectionNewer, AnchorSequence: 8, ThroughSequence: 9, MaxBytes: big}, true},
		{"an empty page", PageRequest{Direction: DirectionNewer, AnchorSequence: 21, MaxBytes: big}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := l.Page(c.req)
			if err != nil {
				t.Fatal(err)
			}
			if p.EndsAtTurnBoundary != c.want {
				t.Errorf("page %d..%d: EndsAtTurnBoundary %v, want %v", p.FirstSeq, p.LastSeq, p.EndsAtTurnBoundary, c.want)
			}
		})
	}
}

func TestAnEmptyTranscriptPagesEmpty(t *testing.T) {
	l := openLog(t, newPath(t))
	for _, dir := range []string{DirectionOlder, DirectionNewer} {
		p, err := l.Page(PageRequest{Direction: dir, MaxBytes: 10})
		if err != nil || len(p.Records) != 0 || p.NextCursor != "" || !p.EndsAtTurnBoundary {
			t.Errorf("%s: %+v, %v", dir, p, err)
		}
	}
}

func TestARecordLargerThanMaxBytesMakesAPageAlone(t *testing.T) {
	l := openLog(t, newPath(t))
	for i := range 9 {
		data := "s"
		if i == 4 {
			data = strings.Repeat("L", 5000)
		}
		mustAppend(t, l, "note", "", data)
	}
	for _, dir := range []string{DirectionOlder, DirectionNewer} {
		req := PageRequest{Direction: dir, MaxBytes: 320}
		var pages [][2]uint64
		for {
			p, err := l.Page(req)
			if err != nil {
				t.Fatal(err)
			}
			checkPage(t, p, req.MaxBytes)
			pages = append(pages, [2]uint64{p.FirstSeq, p.LastSeq})
			if p.FirstSeq == 5 && (p.LastSeq != 5 || p.RawBytes <= 320) {
				t.Errorf("%s: the large record came in page %d..%d of %d bytes", dir, p.FirstSeq, p.LastSeq, p.RawBytes)
			}
			if p.NextCursor == "" {
				break
			}
			req.Cursor = p.NextCursor
		}
		want := [][2]uint64{{6, 9}, {5, 5}, {1, 4}}
		if dir == DirectionNewer {
			want = [][2]uint64{{1, 4}, {5, 5}, {6, 9}}
		}
		if fmt.Sprint(pages) != fmt.Sprint(want) {
			t.Errorf("%s pages %v, want %v", dir, pages, want)
		}
	}
}

func TestPageRefusesABadCursor(t *testing.T) {
	l := openLog(t, newPath(t))
	appendTurns(t, l, 2)
	other := openLog(t, newPath(t))
	for range 12 {
		mustAppend(t, other, "note", "", strings.Repeat("z", 300))
	}
	op, err := other.Page(PageRequest{Direction: DirectionOlder, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	first, err := l.Page(PageRequest{Direction: DirectionNewer, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	good, err := base64.RawURLEncoding.DecodeString(first.NextCursor)
	if err != nil {
		t.Fatal(err)
	}
	padded := base64.URLEncoding.EncodeToString(good)
	if !strings.HasSuffix(padded, "=") {
		t.Fatalf("cursor %q needs no padding", good)
	}
	cursors := map[string]string{
		"not base64":                     "!!!",
		"no separator":                   enc("12"),
		"not numbers":                    enc("a:b"),
		"seq 0":                          enc("0:0"),
		"a negative offset":              enc("1:-1"),
		"not canonical":                  enc("01:0"),
		"padded base64":                  padded,
		"an offset not at the seq":       enc("3:5"),
		"a seq past the end":             enc("13:0"),
		"a cursor of another transcript": op.NextCursor,
	}
	for name, cur := range cursors {
		for _, dir := range []string{DirectionOlder, DirectionNewer} {
			_, err := l.Page(PageRequest{Direction: dir, Cursor: cur, MaxBytes: 100})
			if !errors.Is(err, ErrBadCursor) {
				t.Errorf("%s, %s: %v, want ErrBadCursor", name, dir, err)
			}
		}
	}
	for _, cur := range []string{enc("1:0"), enc(string(good))} {
		if _, err := l.Page(PageRequest{Direction: DirectionOlder, Cursor: cur, MaxBytes: 100}); err != nil {
			t.Errorf("a good cursor %q: %v", cur, err)
		}
	}
	for _, req := range []PageRequest{
		{Direction: "", MaxBytes: 100},
		{Direction: "sideways", MaxBytes: 100},
		{Direction: DirectionOlder, MaxBytes: 0},
		{Direction: DirectionNewer, MaxBytes: -1},
	} {
		if _, err := l.Page(req); !errors.Is(err, ErrBadPageRequest) {
			t.Errorf("Page(%+v): %v, want ErrBadPageRequest", req, err)
		}
	}
}

func TestPagesStayCorrectWhileRecordsAreAppended(t *testing.T) {
	l := openLog(t, newPath(t))
	const total = 3000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 2) // one from each goroutine at most
	wg.Go(func() {
		defer close(done)
		for i := range total {
			typ := "note"
			switch i % 5 {
			case 0:
				typ = TypeTurnStart
			case 4:
				typ = TypeTurnEnd
			}
			if _, err := l.Append(typ, "t", strings.Repeat("d", i%200)); err != nil {
				errs <- err
				return
			}
			if i%100 == 0 {
				if err := l.Sync(); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Go(func() {
		for rounds := 0; ; rounds++ {
			select {
			case <-done:
				if rounds > 0 {
					return
				}
			default:
			}
			through := l.Last()
			for _, dir := range []string{DirectionOlder, DirectionNewer} {
				req := PageRequest{Direction: dir, ThroughSequence: through, MaxBytes: 512 + rounds%700}
				if through == 0 {
					req.ThroughSequence = 0
				}
				var n uint64
				for {
					p, err := l.Page(req)
					if err != nil {
						errs <- err
						return
					}
					if err := pageConsistent(p, req.MaxBytes); err != nil {
						errs <- err
						return
					}
					n += uint64(len(p.Records))
					if p.NextCursor == "" {
						break
					}
					req.Cursor = p.NextCursor
				}
				if through != 0 && n != through {
					errs <- fmt.Errorf("%s through %d: read %d records", dir, through, n)
					return
				}
			}
		}
	})
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if l.Last() != total {
		t.Fatalf("Last = %d, want %d", l.Last(), total)
	}
}

// pageConsistent is checkPage for use off the test's goroutine.
func pageConsistent(p Page, maxBytes int) error {
	raw := 0
	for i, r := range p.Records {
		var rec Record
		if err := json.Unmarshal(r, &rec); err != nil {
			return fmt.Errorf("page record %q: %v", r, err)
		}
		if rec.Seq != p.FirstSeq+uint64(i) {
			return fmt.Errorf("page %d..%d: record %d has seq %d", p.FirstSeq, p.LastSeq, i, rec.Seq)
		}
		raw += len(r) + 1
	}
	if raw != p.RawBytes || (raw > maxBytes && len(p.Records) > 1) {
		return fmt.Errorf("page %d..%d: %d bytes, RawBytes %d, maxBytes %d", p.FirstSeq, p.LastSeq, raw, p.RawBytes, maxBytes)
	}
	return nil
}
