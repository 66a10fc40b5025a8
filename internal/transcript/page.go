package transcript

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The directions a page is read in.
const (
	DirectionOlder = "older"
	DirectionNewer = "newer"
)

// PageRequest asks for one page of the transcript.
type PageRequest struct {
	// Direction is DirectionOlder or DirectionNewer.
	Direction string
	// Cursor is the NextCursor of the previous page; "" for a first page.
	// When set it decides where the page starts, and AnchorSequence is
	// ignored.
	Cursor string
	// AnchorSequence is the seq of the record a first page starts from,
	// included; 0 means the end the direction starts at: the newest record
	// when reading older, the first when reading newer.
	AnchorSequence uint64
	// ThroughSequence bounds the transcript the page is read from: records
	// after it are left out, as if the transcript ended there. 0 means the
	// last record. The page reports the bound it used (Page.ThroughSeq).
	ThroughSequence uint64
	// MaxBytes bounds the page's records: the bytes of their lines, each
	// newline included. It must be at least 1. A single record larger than
	// MaxBytes makes a page of its own.
	MaxBytes int
}

// Page is a run of consecutive records.
type Page struct {
	// Records are the records' lines as they are on disk, without their
	// newlines, in ascending seq order, whatever the direction.
	Records []json.RawMessage
	// FirstSeq and LastSeq are the seqs of the first and last of Records;
	// both are 0 when the page is empty.
	FirstSeq, LastSeq uint64
	// ThroughSeq is the last seq of the transcript the page was read from:
	// the request's ThroughSequence, or the last record when that was 0
	// or beyond it.
	ThroughSeq uint64
	// RawBytes is the bytes of transcript the records span, their newlines
	// included.
	RawBytes int
	// NextCursor reads on in the same direction; "" when there is nothing
	// more in that direction.
	NextCursor string
	// EndsAtTurnBoundary reports that the page's far end is a turn
	// boundary: its oldest record is a TypeTurnStart or the first record
	// (paging older), or its newest is a TypeTurnEnd or the last record up
	// to ThroughSeq (paging newer). An empty page, which has reached the
	// end of its direction, ends at a boundary.
	EndsAtTurnBoundary bool
}

// Page reads one page, bounded by req.MaxBytes, older or newer from where
// req says. Pages stay correct while records are appended: a cursor points
// at a record, and records never move.
//
// A cursor that does not decode, or does not point at the start of a record
// of this transcript, is refused with ErrBadCursor; a request with a bad
// direction or byte bound with ErrBadPageRequest.
func (l *Log) Page(req PageRequest) (Page, error) {
	older := req.Direction == DirectionOlder
	if !older && req.Direction != DirectionNewer {
		return Page{}, fmt.Errorf("paging transcript %s: %w: direction %q is neither %q nor %q",
			l.path, ErrBadPageRequest, req.Direction, DirectionOlder, DirectionNewer)
	}
	if req.MaxBytes < 1 {
		return Page{}, fmt.Errorf("paging transcript %s: %w: maxBytes %d is below 1", l.path, ErrBadPageRequest, req.MaxBytes)
	}
	var cur cursor
	if req.Cursor != "" {
		var err error
		if cur, err = decodeCursor(req.Cursor); err != nil {
			return Page{}, fmt.Errorf("paging transcript %s: %w: %v", l.path, ErrBadCursor, err)
		}
	}

	l.mu.Lock()
	p, sp, err := l.pageLocked(req, older, cur)
	l.mu.Unlock()
	if err != nil {
		return Page{}, fmt.Errorf("paging transcript %s: %w", l.path, err)
	}

	lines, err := sp.read()
	if err != nil {
		return Page{}, fmt.Errorf("paging transcript %s: %w", l.path, err)
	}
	if len(lines) == 0 {
		p.EndsAtTurnBoundary = true
		return p, nil
	}
	p.Records = make([]json.RawMessage, len(lines))
	for i, line := range lines {
		p.Records[i] = line
	}
	if older {
		p.EndsAtTurnBoundary = p.EndsAtTurnBoundary || lineType(lines[0]) == TypeTurnStart
	} else {
		p.EndsAtTurnBoundary = p.EndsAtTurnBoundary || lineType(lines[len(lines)-1]) == TypeTurnEnd
	}
	return p, nil
}

// pageLocked chooses the page's records from the index, without reading
// the file. EndsAtTurnBoundary is set only when the page reaches the first
// or last record; the caller looks at the records' types.
func (l *Log) pageLocked(req PageRequest, older bool, cur cursor) (Page, span, error) {
	if l.f == nil {
		return Page{}, span{}, ErrClosed
	}
	last := uint64(len(l.offsets))
	through := last
	if req.ThroughSequence != 0 && req.ThroughSequence < last {
		through = req.ThroughSequence
	}
	start := req.AnchorSequence
	if req.Cursor != "" {
		if cur.seq > last || l.offsets[cur.seq-1] != cur.off {
			return Page{}, span{}, fmt.Errorf("%w: it does not point at a record of this transcript", ErrBadCursor)
		}
		start = cur.seq
	}
	p := Page{ThroughSeq: through}
	limit := int64(req.MaxBytes)
	var lo, hi uint64
	if older {
		if start == 0 || start > through {
			start = through
		}
		if start == 0 {
			return p, span{}, nil
		}
		lo, hi = start, start
		total := l.sizeLocked(lo)
		for lo > 1 && total+l.sizeLocked(lo-1) <= limit {
			lo--
			total += l.sizeLocked(lo)
		}
		if lo > 1 {
			p.NextCursor = cursor{seq: lo - 1, off: l.offsets[lo-2]}.encode()
		}
		p.EndsAtTurnBoundary = lo == 1
	} else {
		if start == 0 {
			start = 1
		}
		if start > through {
			return p, span{}, nil
		}
		lo, hi = start, start
		total := l.sizeLocked(hi)
		for hi < through && total+l.sizeLocked(hi+1) <= limit {
			hi++
			total += l.sizeLocked(hi)
		}
		if hi < through {
			p.NextCursor = cursor{seq: hi + 1, off: l.offsets[hi]}.encode()
		}
		p.EndsAtTurnBoundary = hi == through
	}
	sp := l.spanLocked(lo, hi)
	p.FirstSeq, p.LastSeq = lo, hi
	p.RawBytes = int(sp.offsets[len(sp.offsets)-1] - sp.offsets[0])
	return p, sp, nil
}

// cursor points at the record a page starts from: its seq and the byte
// offset of its line, so that a cursor of another file, or of a file that
// was rewritten, is found out. On the wire it is base64 of "seq:offset".
type cursor struct {
	seq uint64
	off int64
}

func (c cursor) encode() string {
	return base64.RawURLEncoding.EncodeToString(
		[]byte(strconv.FormatUint(c.seq, 10) + ":" + strconv.FormatInt(c.off, 10)))
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, fmt.Errorf("it does not decode")
	}
	seqStr, offStr, ok := strings.Cut(string(b), ":")
	if !ok {
		return cursor{}, fmt.Errorf("it does not decode")
	}
	seq, err1 := strconv.ParseUint(seqStr, 10, 64)
	off, err2 := strconv.ParseInt(offStr, 10, 64)
	c := cursor{seq: seq, off: off}
	if err1 != nil || err2 != nil || seq == 0 || off < 0 || c.encode() != s {
		return cursor{}, fmt.Errorf("it does not decode")
	}
	return c, nil
}
