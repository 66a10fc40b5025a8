package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentd-dev/agentd/protocol"
)

// echoConn is the anchors' client. It does the work agentd's client does for
// a request, without the protocol's checks: encode the input and the request
// line, write and flush it under a write lock, and let one reader goroutine
// decode each response line and hand it to the waiting caller by request id;
// the caller then decodes the result.
type echoConn struct {
	nc     net.Conn
	nextID atomic.Uint64

	wmu sync.Mutex
	w   *bufio.Writer

	mu      sync.Mutex
	pending map[string]chan echoReply // guarded by mu
	err     error                     // guarded by mu

	done chan struct{}
}

type echoReply struct {
	RequestID string          `json:"requestId"`
	Operation string          `json:"operation"`
	OK        bool            `json:"ok"`
	Result    json.RawMessage `json:"result"`
	Error     *protocol.Error `json:"error"`
}

type echoFrame struct {
	RequestID string          `json:"requestId"`
	Operation string          `json:"operation"`
	Input     json.RawMessage `json:"input"`
}

var errEchoClosed = errors.New("echo connection closed")

func dialEcho(ctx context.Context, sock string) (*echoConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	c := &echoConn{
		nc:      nc,
		w:       bufio.NewWriterSize(nc, 32<<10),
		pending: make(map[string]chan echoReply),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

func (c *echoConn) Close() error {
	c.nc.Close()
	<-c.done
	return nil
}

// Request sends operation with input and decodes the result into result.
func (c *echoConn) Request(operation string, input, result any) error {
	raw, err := json.Marshal(input)
	if err != nil {
		return err
	}
	if input == nil {
		raw = []byte("{}")
	}
	id := "r" + strconv.FormatUint(c.nextID.Add(1), 36)
	ch := make(chan echoReply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	line, err := json.Marshal(echoFrame{RequestID: id, Operation: operation, Input: raw})
	if err != nil {
		return err
	}
	line = append(line, '\n')
	c.wmu.Lock()
	_, err = c.w.Write(line)
	if err == nil {
		err = c.w.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.nc.Close()
		return err
	}
	var rep echoReply
	select {
	case rep = <-ch:
	case <-c.done:
		select {
		case rep = <-ch:
		default:
			return errEchoClosed
		}
	}
	if !rep.OK {
		return fmt.Errorf("%s failed", operation)
	}
	if result != nil {
		return json.Unmarshal(rep.Result, result)
	}
	return nil
}

func (c *echoConn) readLoop() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var err error
	for {
		var line []byte
		line, err = r.ReadSlice('\n')
		if err != nil {
			break
		}
		var rep echoReply
		if err = json.Unmarshal(line, &rep); err != nil {
			break
		}
		c.mu.Lock()
		ch, ok := c.pending[rep.RequestID]
		delete(c.pending, rep.RequestID)
		c.mu.Unlock()
		if ok {
			ch <- rep
		}
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %v", errEchoClosed, err)
	}
	c.mu.Unlock()
	c.nc.Close()
}

// rawConn is the floor: one line written and one line read back on the same
// goroutine, no JSON at all.
type rawConn struct {
	nc   net.Conn
	r    *bufio.Reader
	line []byte
}

func dialRaw(ctx context.Context, sock string, lineBytes int) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	line := make([]byte, lineBytes+1)
	for i := range line {
		line[i] = 'x'
	}
	line[lineBytes] = '\n'
	return &rawConn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), line: line}, nil
}

func (c *rawConn) roundTrip() error {
	if _, err := c.nc.Write(c.line); err != nil {
		return err
	}
	got, err := c.r.ReadSlice('\n')
	if err == nil && len(got) != len(c.line) {
		err = fmt.Errorf("raw echo returned %d bytes, sent %d", len(got), len(c.line))
	}
	return err
}

func (c *rawConn) Close() error { return c.nc.Close() }
