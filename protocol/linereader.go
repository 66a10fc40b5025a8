package protocol

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrMessageTooLarge is returned by LineReader.Next for a message over
// MaxMessageBytes; writers refuse to send one with it too.
var ErrMessageTooLarge = fmt.Errorf("message exceeds %d bytes", MaxMessageBytes)

// lineReaderBufferSize is how much of a stream a LineReader buffers: a
// message that fits is returned without a copy.
const lineReaderBufferSize = 64 << 10

// LineReader reads the messages of a stream in this package's framing: one
// message a line, ended by "\n" (a "\r" before it is dropped too), at most
// MaxMessageBytes each, the line ending excluded. It is the one reader of
// that framing, for hosts, workers and clients alike. A LineReader is not
// safe for concurrent use.
type LineReader struct {
	r   *bufio.Reader
	max int
	// big gathers a message longer than r's buffer.
	big []byte
}

// NewLineReader returns a LineReader of r.
func NewLineReader(r io.Reader) *LineReader {
	return newLineReader(r, MaxMessageBytes, lineReaderBufferSize)
}

func newLineReader(r io.Reader, max, bufSize int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, bufSize), max: max}
}

// Next returns the next message without its line ending. The slice is
// valid until the next call. At the end of the stream Next returns io.EOF.
//
// A message longer than MaxMessageBytes is refused with ErrMessageTooLarge
// as soon as it is known to be, before its end arrives. A stream that ends
// in the middle of a line returns the line's bytes with
// io.ErrUnexpectedEOF: a peer that died while writing, or one that sent
// its last message without a newline; whether to take it is the caller's
// choice. After an error other than io.ErrUnexpectedEOF the reader is
// spent: the stream is no longer at the start of a message.
func (l *LineReader) Next() ([]byte, error) {
	l.big = l.big[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		switch {
		case err == nil:
			line := chunk
			if len(l.big) > 0 {
				l.big = append(l.big, chunk...)
				line = l.big
			}
			line = line[:len(line)-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if len(line) > l.max {
				return nil, ErrMessageTooLarge
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			l.big = append(l.big, chunk...)
			// One byte of room for a "\r" that may end the line.
			if len(l.big) > l.max+1 {
				return nil, ErrMessageTooLarge
			}
		case errors.Is(err, io.EOF) && len(l.big)+len(chunk) > 0:
			line := append(l.big, chunk...)
			l.big = line
			if len(line) > l.max {
				return nil, ErrMessageTooLarge
			}
			return line, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
