// Package transcript owns the durable, append-only transcript of one
// session: a file of JSON Lines, one record a line, each record numbered by
// a sequence that starts at 1 and grows by exactly 1. Its single writer is
// the session's worker, which opens the file with Open and holds it for as
// long as it runs; anything else reads it with ReadAll.
//
// On disk a record is one line:
//
//	{"seq":7,"time":"2026-01-02T15:04:05.123456789Z","type":"tool_call","turnId":"t1","data":{…}}
//
// The package keeps what was written whole. A torn last line, left by a
// write that never finished, is cut off when the file is opened and its
// bytes are kept beside the file (<path>.damaged-<UTC time>-<n>), never
// silently dropped. A damaged line before the end makes the transcript
// readable up to the last good record before it and refuses further
// appends; the file is left exactly as it is. A write that fails (the disk
// full) is undone, so the file on disk always ends after a whole record.
//
// The package must know nothing of sessions, agents, providers or the wire
// protocol. A record's type is a string chosen by the caller, and its data
// is opaque JSON. The one thing it reads in them is whether a record is a
// TypeTurnStart or a TypeTurnEnd, to say whether a page ends at a turn
// boundary.
package transcript
