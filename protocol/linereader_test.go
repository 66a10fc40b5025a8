package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// chunked hands out its bytes at most n at a time, the way a socket may.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// readAll reads messages until an error, returning the messages (copied)
// and the error; a line returned with io.ErrUnexpectedEOF comes last.
func readAll(l *LineReader) ([]string, error) {
	var msgs []string
	for {
		m, err := l.Next()
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
			msgs = append(msgs, string(m))
		}
		if err != nil {
			return msgs, err
		}
	}
}

// model is what a LineReader with limit max must return for data: split
// at each newline, drop one "\r" before it, refuse a line over max, and
// hand back a last line without its newline with io.ErrUnexpectedEOF.
func model(data []byte, max int) ([]string, error) {
	var msgs []string
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSuffix(data[:i], []byte("\r"))
		if len(line) > max {
			return msgs, ErrMessageTooLarge
		}
		msgs = append(msgs, string(line))
		data = data[i+1:]
	}
	switch {
	case len(data) == 0:
		return msgs, io.EOF
	case len(data) > max:
		return msgs, ErrMessageTooLarge
	}
	return append(msgs, string(data)), io.ErrUnexpectedEOF
}

func TestLineReaderSplitsMessagesAndBoundsThem(t *testing.T) {
	const max = 8
	cases := []struct {
		name, data string
		msgs       []string
		err        error
	}{
		{"messages", "{}\n{\"a\":1}\n", []string{"{}", `{"a":1}`}, io.EOF},
		{"empty stream", "", nil, io.EOF},
		{"a carriage return before the newline is dropped", "ab\r\n\r\n", []string{"ab", ""}, io.EOF},
		{"a message of exactly the limit", "12345678\n12345678\r\n", []string{"12345678", "12345678"}, io.EOF},
		{"one byte over the limit", "ok\n123456789\nnext\n", []string{"ok"}, ErrMessageTooLarge},
		{"a last line without its newline", "a\nb", []string{"a", "b"}, io.ErrUnexpectedEOF},
		{"a last line over the limit without its newline", "a\n123456789", []string{"a"}, ErrMessageTooLarge},
		{"a line far over the limit is refused before its end", strings.Repeat("x", 100), nil, ErrMessageTooLarge},
	}
	for _, c := range cases {
		for _, bufSize := range []int{1, 16, 64} {
			for _, chunk := range []int{1, 3, 1000} {
				l := newLineReader(&chunked{b: []byte(c.data), n: chunk}, max, bufSize)
				msgs, err := readAll(l)
				if !errors.Is(err, c.err) || strings.Join(msgs, "|") != strings.Join(c.msgs, "|") {
					t.Errorf("%s (buffer %d, chunks of %d): %q, %v; want %q, %v", c.name, bufSize, chunk, msgs, err, c.msgs, c.err)
				}
			}
		}
	}
}

func TestLineReaderRefusesAnEndlessLineWithoutReadingItAll(t *testing.T) {
	endless := io.MultiReader(strings.NewReader("{\"pad\":\""), neverEnding('x'))
	if _, err := NewLineReader(endless).Next(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("Next = %v; want ErrMessageTooLarge", err)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestLineReaderAcceptsAMessageOfMaxMessageBytes(t *testing.T) {
	msg := append(append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), MaxMessageBytes-10)...), `"}`...)
	l := NewLineReader(bytes.NewReader(append(append(msg, '\n'), append(msg, 'x', '\n')...)))
	if got, err := l.Next(); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("a message of %d bytes: %d bytes, %v", len(msg), len(got), err)
	}
	if _, err := l.Next(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("a message of %d bytes: %v; want ErrMessageTooLarge", len(msg)+1, err)
	}
}

// FuzzLineReader checks the reader against the model for any bytes, any
// way the stream is cut and any size of small buffer, the limit small
// enough that messages cross it and outgrow the buffer. Read again under
// a budget, it returns the same messages up to one it refuses with
// ErrOverBudget, never holds more than the budget, and gives all of it
// back once released.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("{}\n{\"a\":1}\r\n"), uint8(16), uint8(1), uint16(0))
	f.Add([]byte("abc"), uint8(20), uint8(2), uint16(64))
	f.Add([]byte("0123456789abcdefghij\n\n\r\r\n"), uint8(0), uint8(7), uint16(1000))
	f.Add([]byte(strings.Repeat("y", 300)+"\n"), uint8(5), uint8(255), uint16(40))
	f.Add([]byte(strings.Repeat("z", 100)+"\n"+strings.Repeat("w", 200)+"\nab\n"), uint8(250), uint8(16), uint16(300))
	f.Fuzz(func(t *testing.T, data []byte, max, chunk uint8, budget uint16) {
		small := 16 + int(chunk)%48
		l := newLineReader(&chunked{b: data, n: 1 + int(chunk)}, int(max), small)
		msgs, err := readAll(l)
		wantMsgs, wantErr := model(data, int(max))
		if !errors.Is(err, wantErr) || len(msgs) != len(wantMsgs) {
			t.Fatalf("read %q, %v; want %q, %v", msgs, err, wantMsgs, wantErr)
		}
		for i := range msgs {
			if msgs[i] != wantMsgs[i] {
				t.Fatalf("message %d is %q; want %q", i, msgs[i], wantMsgs[i])
			}
		}

		b := &countingBudget{limit: int(budget)}
		l = newLineReader(&chunked{b: data, n: 1 + int(chunk)}, int(max), small)
		l.budget = b
		msgs, err = readAll(l)
		l.Release()
		if !errors.Is(err, ErrOverBudget) && (!errors.Is(err, wantErr) || len(msgs) != len(wantMsgs)) {
			t.Fatalf("under a budget of %d: read %q, %v; want %q, %v", budget, msgs, err, wantMsgs, wantErr)
		}
		for i := range msgs {
			if i >= len(wantMsgs) || msgs[i] != wantMsgs[i] {
				t.Fatalf("under a budget of %d: message %d is %q; want %q", budget, i, msgs[i], wantMsgs)
			}
		}
		if b.held != 0 || b.peak > b.limit {
			t.Fatalf("under a budget of %d: %d bytes still held once released, %d at most", budget, b.held, b.peak)
		}
	})
}

// countingBudget is a ReadBudget of limit bytes for one reader.
type countingBudget struct{ limit, held, peak int }

func (b *countingBudget) Reserve(n int) bool {
	if b.held+n > b.limit {
		return false
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	return true
}

func (b *countingBudget) Release(n int) { b.held -= n }

func TestLineReaderHoldsOnlyItsSmallBufferBetweenMessages(t *testing.T) {
	big := strings.Repeat("b", 100<<10)
	b := &countingBudget{limit: 1 << 20}
	// A read never spans two of these: each message arrives on its own.
	src := io.MultiReader(strings.NewReader(big+"\n"), strings.NewReader("small\n"), strings.NewReader(big+"\n"), strings.NewReader("rest"))
	l := NewBudgetedLineReader(src, b)
	if m, err := l.Next(); err != nil || len(m) != len(big) {
		t.Fatalf("a large message: %d bytes, %v", len(m), err)
	}
	if b.held < len(big) {
		t.Fatalf("%d bytes reserved for a message of %d", b.held, len(big))
	}
	if m, err := l.Next(); err != nil || string(m) != "small" {
		t.Fatalf("a small message: %q, %v", m, err)
	}
	if b.held != 0 || cap(l.buf) != lineReaderBufferSize {
		t.Fatalf("past the large message: %d bytes reserved, a buffer of %d; want none and %d", b.held, cap(l.buf), lineReaderBufferSize)
	}
	if m, err := l.Next(); err != nil || len(m) != len(big) {
		t.Fatalf("a second large message: %d bytes, %v", len(m), err)
	}
	if m, err := l.Next(); !errors.Is(err, io.ErrUnexpectedEOF) || string(m) != "rest" {
		t.Fatalf("the last line: %q, %v", m, err)
	}
	if b.held != 0 {
		t.Fatalf("past the second large message: %d bytes reserved", b.held)
	}
	if _, err := l.Next(); !errors.Is(err, io.EOF) || l.buf != nil {
		t.Fatalf("at the end: %v, a buffer of %d; want io.EOF and none", err, cap(l.buf))
	}
}

// lentBuffers are Buffers that count what is out.
type lentBuffers struct{ out, gets int }

func (b *lentBuffers) Get(n int) []byte { b.out++; b.gets++; return make([]byte, 0, n) }
func (b *lentBuffers) Put([]byte)       { b.out-- }
func (b *lentBuffers) Size(n int) int   { return n }

// A reader lent Buffers takes every buffer from them and gives each back
// once it is past it: all of them once it is spent.
func TestLineReaderGivesLentBuffersBack(t *testing.T) {
	big := strings.Repeat("b", 100<<10)
	bufs := &lentBuffers{}
	l := NewLineReader(io.MultiReader(strings.NewReader(big+"\n"), strings.NewReader("small\n")))
	l.SetBuffers(bufs)
	for _, want := range []int{len(big), len("small")} {
		if m, err := l.Next(); err != nil || len(m) != want {
			t.Fatalf("a message of %d bytes: %d bytes, %v", want, len(m), err)
		}
	}
	if bufs.out != 1 || bufs.gets < 3 {
		t.Fatalf("past the large message: %d buffers out of %d lent; want the small one alone, of at least 3", bufs.out, bufs.gets)
	}
	if _, err := l.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v", err)
	}
	if bufs.out != 0 {
		t.Fatalf("spent, the reader keeps %d lent buffers", bufs.out)
	}
}
