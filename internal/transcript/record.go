package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// MaxRecordBytes bounds one record's line, its newline excluded. Append
// refuses a longer record, and a longer line on disk is not a record.
const MaxRecordBytes = 16 << 20

// The record types that mark turn boundaries, the protocol's. A page
// reports that it ends at a turn boundary when its oldest record is a
// TypeTurnStart (paging older) or its newest a TypeTurnEnd (paging newer).
// Every other type is the caller's own.
const (
	TypeTurnStart = protocol.RecordTurnStart
	TypeTurnEnd   = protocol.RecordTurnEnd
)

// Record is one entry of a transcript.
type Record struct {
	// Seq numbers the record: 1 for the first, then one more for each.
	Seq uint64 `json:"seq"`
	// Time is when the record was appended, in UTC.
	Time time.Time `json:"time"`
	// Type says what the record is; the caller chooses it.
	Type string `json:"type"`
	// TurnID is the turn the record belongs to, if any.
	TurnID string `json:"turnId,omitempty"`
	// Data is the record's content, any JSON value.
	Data json.RawMessage `json:"data"`
}

// encodeLine appends the line of one record, newline included, to b. data
// must be valid, compact JSON, as json.Marshal returns it.
func encodeLine(b []byte, seq uint64, t time.Time, typ, turnID string, data []byte) ([]byte, error) {
	ts, err := t.MarshalJSON()
	if err != nil {
		return b, fmt.Errorf("%w: time: %v", ErrInvalidRecord, err)
	}
	if bytes.IndexByte(data, '\n') >= 0 {
		// json.Marshal never returns a raw newline; refuse one rather
		// than split a record over two lines.
		return b, fmt.Errorf("%w: data holds a newline", ErrInvalidRecord)
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"time":`...)
	b = append(b, ts...)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	if turnID != "" {
		b = append(b, `,"turnId":`...)
		b = appendString(b, turnID)
	}
	b = append(b, `,"data":`...)
	b = append(b, data...)
	b = append(b, "}\n"...)
	return b, nil
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// parseLine decodes line (without its newline) into rec, reusing rec's Data
// buffer. It reports why the line is not a record, or "" when it is one;
// the caller checks the sequence.
func parseLine(line []byte, rec *Record) string {
	*rec = Record{Data: rec.Data[:0]}
	if err := json.Unmarshal(line, rec); err != nil {
		return "not a JSON record: " + err.Error()
	}
	switch {
	case rec.Seq == 0:
		return "the record has no seq"
	case rec.Time.IsZero():
		return "the record has no time"
	case rec.Type == "":
		return "the record has no type"
	case len(rec.Data) == 0:
		return "the record has no data"
	}
	return ""
}

// lineType returns the type of the record on line, "" when it has none.
func lineType(line []byte) string {
	var r struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &r) != nil {
		return ""
	}
	return r.Type
}
