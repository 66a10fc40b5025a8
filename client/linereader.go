package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/agentd-dev/agentd/protocol"
)

// lineReader reads newline-delimited messages of at most
// protocol.MaxMessageBytes.
type lineReader struct {
	r   *bufio.Reader
	big []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

var errTooLarge = fmt.Errorf("host sent a message over %d bytes", protocol.MaxMessageBytes)

// read returns the next message without its newline, valid until the next read.
func (l *lineReader) read() ([]byte, error) {
	l.big = l.big[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		switch {
		case err == nil:
			if len(l.big) > 0 {
				chunk = append(l.big, chunk...)
			}
			chunk = chunk[:len(chunk)-1]
			if len(chunk) > protocol.MaxMessageBytes {
				return nil, errTooLarge
			}
			return chunk, nil
		case errors.Is(err, bufio.ErrBufferFull):
			l.big = append(l.big, chunk...)
			if len(l.big) > protocol.MaxMessageBytes {
				return nil, errTooLarge
			}
		default:
			return nil, err
		}
	}
}
