package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// roleRawStream runs this binary as the raw stream anchor's server.
const roleRawStream = "-role-rawstream"

// runRawStream serves one connection on a unix socket: it writes n copies
// of a frame (the template's "sequence" counting up), as fast as the
// socket takes them, through a 64 KiB buffer, then exits.
//
//	sessionbench -role-rawstream SOCKET FRAMEFILE N
func runRawStream(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "rawstream: want SOCKET FRAMEFILE N")
		return 2
	}
	sock, frameFile := args[0], args[1]
	n, err := strconv.Atoi(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawstream:", err)
		return 2
	}
	tmpl, err := os.ReadFile(frameFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawstream:", err)
		return 1
	}
	loc := seqField.FindIndex(tmpl)
	if loc == nil {
		fmt.Fprintln(os.Stderr, "rawstream: the frame has no sequence")
		return 1
	}
	prefix, suffix := tmpl[:loc[0]+len(`"sequence":`)], tmpl[loc[1]:]
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawstream:", err)
		return 1
	}
	defer ln.Close()
	conn, err := ln.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawstream:", err)
		return 1
	}
	defer conn.Close()
	w := bufio.NewWriterSize(conn, 64<<10)
	var num []byte
	for i := 1; i <= n; i++ {
		w.Write(prefix)
		num = strconv.AppendInt(num[:0], int64(i), 10)
		w.Write(num)
		w.Write(suffix)
		if err := w.WriteByte('\n'); err != nil {
			fmt.Fprintln(os.Stderr, "rawstream:", err)
			return 1
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "rawstream:", err)
		return 1
	}
	return 0
}

var seqField = regexp.MustCompile(`"sequence":[0-9]+`)

// rawStream is the delta-rate anchor: a process of its own writes n copies
// of frame, one of agentd's message_update frames, into a unix socket, and
// this process reads them the way the Go client does (a 64 KiB buffered
// line reader, protocol.DecodeHostFrame, a copy, the pushed head decoded
// again, a channel of 1024 to the consumer) and the consumer measures them
// the way the stream part does. It returns frames/s, first to last frame.
func (b *bench) rawStream(ctx context.Context, dir string, frame []byte, n int) (float64, error) {
	if len(frame) == 0 {
		return 0, errors.New("no sample frame")
	}
	frameFile := filepath.Join(dir, "frame.json")
	if err := os.WriteFile(frameFile, frame, 0o644); err != nil {
		return 0, err
	}
	sock := filepath.Join(dir, "raw.sock")
	os.Remove(sock)
	cmd := command(ctx, os.Environ(), b.self, roleRawStream, sock, frameFile, strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return 0, err
		}
		time.Sleep(time.Millisecond)
	}
	defer conn.Close()

	frames := make(chan []byte, 1024)
	readErr := make(chan error, 1)
	go func() {
		defer close(frames)
		r := bufio.NewReaderSize(conn, 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if errors.Is(err, io.EOF) {
				readErr <- nil
				return
			}
			if err != nil {
				readErr <- err
				return
			}
			line = line[:len(line)-1]
			f, err := protocol.DecodeHostFrame(line)
			if err != nil {
				readErr <- err
				return
			}
			cp := append([]byte(nil), line...)
			var head protocol.Pushed
			if err := json.Unmarshal(cp, &head); err != nil || f.Kind != protocol.KindSessionDelta {
				readErr <- fmt.Errorf("unexpected frame %q", cp)
				return
			}
			frames <- cp
		}
	}()
	var first, last time.Time
	count, text := 0, 0
	for raw := range frames {
		at := time.Now()
		if !bytes.Contains(raw, evMessageUpdate) {
			continue
		}
		m, ok := textLen(raw)
		if !ok {
			return 0, errors.New("the sample frame's text has escapes")
		}
		if count == 0 {
			first = at
		}
		count++
		text += m
		last = at
	}
	if err := <-readErr; err != nil {
		return 0, err
	}
	if count != n {
		return 0, fmt.Errorf("read %d frames of %d", count, n)
	}
	return float64(count) / last.Sub(first).Seconds(), nil
}
