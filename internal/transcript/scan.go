package transcript

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// scanned is what a scan found in a transcript file.
type scanned struct {
	// offsets[i] is the byte offset of the line of the record with seq i+1.
	offsets []int64
	// end is the end of the last good line: where the next record goes.
	end int64
	// records holds the records themselves when the scan was asked to
	// keep them.
	records []Record
	// At most one of torn and damage is set: the first line that is not
	// the record expected there is either the last line (torn) or not.
	torn   *Tail
	damage *DamageInfo
}

// scan reads the first size bytes of r line by line, checking that each is
// the record that should be there, and stops at the first that is not.
// A line that ends without a newline, or that is the last line and does not
// parse as a record, is a torn tail; any other bad line is damage.
func scan(r io.ReaderAt, size int64, keep bool) (scanned, error) {
	var s scanned
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10)
	var (
		buf  []byte
		rec  Record
		off  int64
		line int
	)
	for off < size {
		line++
		b, n, complete, tooLong, err := readLine(br, buf[:0])
		if err != nil {
			return s, fmt.Errorf("reading line %d: %w", line, err)
		}
		buf = b
		last := off+n >= size
		want := uint64(len(s.offsets)) + 1
		var reason string
		torn := false
		switch {
		case !complete:
			reason, torn = "the line ends without a newline", true
		case tooLong:
			reason, torn = fmt.Sprintf("the line is longer than %d bytes", MaxRecordBytes), last
		default:
			if reason = parseLine(b[:len(b)-1], &rec); reason != "" {
				torn = last
			} else if rec.Seq != want {
				// A whole record with the wrong number is no torn
				// write; it is damage wherever it is.
				reason = fmt.Sprintf("expected seq %d, found seq %d", want, rec.Seq)
			}
		}
		if reason != "" {
			if torn {
				s.torn = &Tail{Line: line, Offset: off, Bytes: size - off, Reason: reason}
			} else {
				s.damage = &DamageInfo{Line: line, Offset: off, Reason: reason}
			}
			break
		}
		s.offsets = append(s.offsets, off)
		if keep {
			r := rec
			r.Data = append(json.RawMessage(nil), rec.Data...)
			s.records = append(s.records, r)
		}
		off += n
	}
	s.end = off
	return s, nil
}

// readLine reads one line, its newline included, appending it to buf.
// n counts every byte consumed. complete is false when the input ended
// before a newline. A line longer than MaxRecordBytes+1 is consumed whole
// but not kept: tooLong is set and the returned line is empty.
func readLine(br *bufio.Reader, buf []byte) (line []byte, n int64, complete, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		n += int64(len(frag))
		if !tooLong {
			if len(buf)+len(frag) > MaxRecordBytes+1 {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		switch err {
		case nil:
			return buf, n, true, tooLong, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return buf, n, false, tooLong, nil
		default:
			return buf, n, false, tooLong, err
		}
	}
}
