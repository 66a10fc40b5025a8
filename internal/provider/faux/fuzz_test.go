package faux_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/internal/provider/faux"
)

// FuzzParseScript feeds the script decoder arbitrary bytes: it must never
// panic, and a script it accepts must hold only steps it can play.
func FuzzParseScript(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "example.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	for _, seed := range []string{
		`{"replies":[]}`,
		`{"replies":[{"steps":[{"text":"hi"},{"thinking":"hm","repeat":3}]}]}`,
		`{"replies":[{"steps":[{"tool":"bash","arguments":{"command":"ls"},"id":"c1"}]}]}`,
		`{"replies":[{"steps":[{"delay":"5ms"},{"error":{"status":429,"message":"slow","retryAfter":"2s"}}]}]}`,
		`{"replies":[{"steps":[{"error":{"status":500}},{"text":"after"}]}]}`,
		`{"replies":[{"steps":[{"text":"a","delay":"1s"}]}]}`,
		`{"replies":[{"steps":[{"repeat":-1,"text":"x"}]}]}`,
		`{"replies":[{"steps":[{"txt":"x"}]}]} trailing`,
		`{"replies":null}`,
		`{"replies":[null]}`,
		`{"contextWindow":4096}`,
		`{"contextWindow":1}`,
		`{"contextWindow":4096,"replies":[{"steps":[{"text":"x"}]}]}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := faux.ParseScript(data)
		if err != nil {
			if s != nil {
				t.Fatal("a script and an error")
			}
			return
		}
		for _, r := range s.Replies {
			for i, st := range r.Steps {
				switch st.Kind {
				case faux.StepText, faux.StepThinking:
					if st.Repeat < 1 || st.Repeat > faux.MaxRepeat {
						t.Fatalf("repeat %d accepted", st.Repeat)
					}
				case faux.StepDelay:
					if st.Delay < 0 || st.Delay > faux.MaxDelay {
						t.Fatalf("delay %v accepted", st.Delay)
					}
				case faux.StepTool:
					var args map[string]any
					if st.Tool == "" || json.Unmarshal(st.Arguments, &args) != nil || args == nil {
						t.Fatalf("tool step %+v accepted", st)
					}
				case faux.StepError:
					if i != len(r.Steps)-1 {
						t.Fatal("a step after an error accepted")
					}
					if st.Message == "" || st.RetryAfter < 0 {
						t.Fatalf("error step %+v accepted", st)
					}
				default:
					t.Fatalf("step of kind %q accepted", st.Kind)
				}
			}
		}
	})
}
