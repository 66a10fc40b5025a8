package agentdtest

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// DyingPeer listens on a socket of the test's as a host would, accepts
// one connection, answers its hello, and then does die to it, as a host
// dying would, and closes it; or, with hold, keeps it until the test
// ends. It returns the endpoint and a channel closed once die has run.
func DyingPeer(t testing.TB, die func(*net.UnixConn, *bufio.Reader), hold bool) (string, <-chan struct{}) {
	t.Helper()
	endpoint := filepath.Join(ShortDir(t), "h.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: endpoint, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	died, served, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(served)
		uc, err := ln.AcceptUnix()
		ln.Close()
		if err != nil {
			close(died)
			return
		}
		defer uc.Close()
		r := bufio.NewReader(uc)
		if _, err := r.ReadBytes('\n'); err == nil {
			b, _ := json.Marshal(protocol.Accepted{Kind: protocol.KindAccepted, HostEpoch: "e1", ConnectionID: "c1", Protocol: protocol.ProtocolVersion})
			uc.Write(append(b, '\n'))
			die(uc, r)
		}
		close(died)
		if hold {
			<-release
		}
	}()
	t.Cleanup(func() { close(release); ln.Close(); <-served })
	return endpoint, died
}
