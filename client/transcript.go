package client

import (
	"context"

	"github.com/agentd-dev/agentd/protocol"
)

// Directions a transcript page is read in.
const (
	PageOlder = "older"
	PageNewer = "newer"
)

// DefaultPageBytes bounds a transcript page whose request names no bound.
const DefaultPageBytes = 64 << 10

// PageRequest asks for one page of a session's transcript.
type PageRequest struct {
	// Direction is PageOlder or PageNewer.
	Direction string
	// Cursor is the previous page's NextCursor; empty for a first page.
	Cursor string
	// Anchor is the record a first page starts from; 0 for the end the
	// direction starts at (the newest record when reading older).
	Anchor uint64
	// Through bounds the transcript read: records after it are left out;
	// 0 for its current end.
	Through uint64
	// MaxBytes bounds the page's records, up to the protocol's
	// MaxMessageBytes/2; 0 for DefaultPageBytes.
	MaxBytes int
}

// TranscriptPage is a run of consecutive transcript records.
type TranscriptPage struct {
	SessionID string
	Direction string
	// Through is the transcript sequence the page was read through.
	Through uint64
	// Records are in ascending seq order, whatever the direction.
	Records []protocol.TranscriptRecord
	// NextCursor reads on in the same direction; empty when nothing more
	// is there.
	NextCursor string
	// EndsAtTurnBoundary reports that the page's far end is a turn
	// boundary.
	EndsAtTurnBoundary bool
}

// TranscriptPage reads a page of the transcript of sessionID (an id or a
// unique prefix).
func (c *Conn) TranscriptPage(ctx context.Context, sessionID string, req PageRequest) (TranscriptPage, error) {
	return c.transcriptPage(ctx, protocol.TranscriptPageInput{SessionID: sessionID}, req)
}

// TranscriptPage reads a page of the stream's session's transcript.
func (s *Session) TranscriptPage(ctx context.Context, req PageRequest) (TranscriptPage, error) {
	return s.c.transcriptPage(ctx, protocol.TranscriptPageInput{SubscriptionID: s.id}, req)
}

func (c *Conn) transcriptPage(ctx context.Context, in protocol.TranscriptPageInput, req PageRequest) (TranscriptPage, error) {
	in.Direction = req.Direction
	in.MaxBytes = req.MaxBytes
	if in.MaxBytes == 0 {
		in.MaxBytes = DefaultPageBytes
	}
	if req.Cursor != "" {
		in.Cursor = &req.Cursor
	}
	if req.Anchor != 0 {
		in.AnchorSequence = &req.Anchor
	}
	if req.Through != 0 {
		in.ThroughSequence = &req.Through
	}
	res, err := Call(ctx, c, opTranscriptPage, in)
	if err != nil {
		return TranscriptPage{}, err
	}
	page := TranscriptPage{
		SessionID: res.SessionID, Direction: res.Direction, EndsAtTurnBoundary: res.EndsAtTurnBoundary,
		Records: res.Records,
	}
	if page.Records == nil {
		page.Records = []protocol.TranscriptRecord{}
	}
	if res.ThroughSequence != nil {
		page.Through = *res.ThroughSequence
	}
	if res.NextCursor != nil {
		page.NextCursor = *res.NextCursor
	}
	return page, nil
}

// opTranscriptPage is session.transcript.page with its records decoded
// as the page's result is: a first screen waits for them.
const opTranscriptPage = protocol.Op[protocol.TranscriptPageInput, decodedPage](protocol.OpSessionTranscriptPage)

// decodedPage is protocol.TranscriptPage, its records decoded.
type decodedPage struct {
	SessionID          string                      `json:"sessionId"`
	Direction          string                      `json:"direction"`
	ThroughSequence    *uint64                     `json:"throughSequence"`
	Records            []protocol.TranscriptRecord `json:"records"`
	NextCursor         *string                     `json:"nextCursor"`
	EndsAtTurnBoundary bool                        `json:"endsAtTurnBoundary"`
}
