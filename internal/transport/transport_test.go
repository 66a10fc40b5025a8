package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns the two ends of a real unix socket connection.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "transport-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := New(nc)
	t.Cleanup(func() { c.Abort(nil); peer.Close() })
	return c, peer
}

func TestReadTakesALastMessageWithoutItsNewlineThenEOF(t *testing.T) {
	c, peer := pair(t)
	if _, err := peer.Write([]byte("{\"a\":1}\r\n{\"b\":2}")); err != nil {
		t.Fatal(err)
	}
	peer.(*net.UnixConn).CloseWrite()
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		if got, err := c.Read(); err != nil || string(got) != want {
			t.Fatalf("Read = %q, %v; want %q", got, err, want)
		}
	}
	if got, err := c.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the last message = %q, %v; want io.EOF", got, err)
	}
}

func TestAMessageOverTheLimitIsRefusedBothWays(t *testing.T) {
	c, peer := pair(t)
	big := bytes.Repeat([]byte("x"), protocol.MaxMessageBytes+1)
	if err := c.Write(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Write of %d bytes: %v; want ErrTooLarge", len(big), err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := peer.Write(append(big, '\n'))
		errc <- err
	}()
	if _, err := c.Read(); !errors.Is(err, ErrTooLarge) || !errors.Is(err, protocol.ErrMessageTooLarge) {
		t.Errorf("Read of %d bytes: %v; want ErrTooLarge", len(big), err)
	}
	c.Abort(nil) // the writer blocked on a full socket ends
	<-errc
}

func TestWriteFrameSendsOneLine(t *testing.T) {
	c, peer := pair(t)
	if err := c.WriteFrame([]byte(`{"kind":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := protocol.NewLineReader(peer).Next()
	if err != nil || string(got) != `{"kind":"hello"}` {
		t.Fatalf("peer read %q, %v", got, err)
	}
}

func TestMessagesLargerThanTheWriteBufferGoOutInOrderBetweenSmallOnes(t *testing.T) {
	c, peer := pair(t)
	msgs := [][]byte{
		[]byte(`{"a":1}`),
		bytes.Repeat([]byte("x"), writeBufferSize+10),
		[]byte(`{"b":2}`),
		bytes.Repeat([]byte("y"), writeBufferSize-100),
		bytes.Repeat([]byte("z"), 200),
	}
	errc := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if err := c.Write(m); err != nil {
				errc <- err
				return
			}
		}
		errc <- c.Flush()
	}()
	r := protocol.NewLineReader(peer)
	for i, want := range msgs {
		got, err := r.Next()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("message %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c.w != nil {
		t.Errorf("a write buffer of %d bytes kept once flushed", cap(c.w))
	}
}
