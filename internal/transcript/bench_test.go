package transcript

import (
	"path/filepath"
	"strings"
	"testing"
)

type benchData struct {
	Text  string `json:"text"`
	Index int    `json:"index"`
}

func benchLog(b *testing.B) *Log {
	l, err := Open(filepath.Join(b.TempDir(), "transcript.jsonl"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkAppend appends records of about 300 bytes, left in the OS's
// buffers.
func BenchmarkAppend(b *testing.B) {
	l := benchLog(b)
	text := strings.Repeat("a", 200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := l.Append("assistant_message", "turn-1", benchData{Text: text, Index: i}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendSync appends records of about 300 bytes and fsyncs each.
func BenchmarkAppendSync(b *testing.B) {
	l := benchLog(b)
	text := strings.Repeat("a", 200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := l.AppendSync("assistant_message", "turn-1", benchData{Text: text, Index: i}); err != nil {
			b.Fatal(err)
		}
	}
}
