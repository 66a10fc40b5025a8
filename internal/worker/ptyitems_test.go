package worker

import (
	"bytes"
	"testing"

	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// Each subscription's item of a PTY's output is its own: the one that
// takes the quoted buffer itself may merge it away and give it back (here:
// overwrite it) before the next item is made, and the others keep the
// output whole.
func TestEachSubscriptionGetsAPTYsOutputOfItsOwn(t *testing.T) {
	quoted := protocol.AppendJSONString(transport.GetBuffer(64), "output")
	want := bytes.Clone(quoted)
	next := ptyItems("pty-1", 7, quoted, false, 3)
	var items []*pendingDelta
	for range 3 {
		it := next()
		if !bytes.Equal(it.ptyData, want) {
			t.Fatalf("item %d carries %q, want %q", len(items)+1, it.ptyData, want)
		}
		copy(it.ptyData, bytes.Repeat([]byte("x"), len(it.ptyData))) // given back and reused
		items = append(items, it)
	}
	if &items[2].ptyData[0] != &quoted[0] {
		t.Error("the last item was not given the quoted buffer itself")
	}
}
