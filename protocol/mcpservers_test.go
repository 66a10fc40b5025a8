package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

func TestSessionMCPSetInputIsCheckedNamingTheFieldAndNeverAValue(t *testing.T) {
	stdio := `{"name":"a","transport":"stdio","command":"/bin/a"}`
	for _, c := range []struct{ name, input, want string }{
		{"no session", `{"servers":[` + stdio + `]}`, `input.sessionId`},
		{"no name", `{"sessionId":"s","servers":[{"transport":"stdio","command":"/bin/a"}]}`, `input.servers[0].name`},
		{"no transport", `{"sessionId":"s","servers":[{"name":"a","command":"/bin/a"}]}`, `input.servers[0].transport`},
		{"relative command", `{"sessionId":"s","servers":[{"name":"a","transport":"stdio","command":"bin/a"}]}`, `input.servers[0].command`},
		{"url on stdio", `{"sessionId":"s","servers":[{"name":"a","transport":"stdio","command":"/bin/a","url":"http://x"}]}`, `input.servers[0].url`},
		{"env on http", `{"sessionId":"s","servers":[{"name":"a","transport":"http","url":"http://x","env":[{"name":"K","value":"v"}]}]}`, `input.servers[0].env`},
		{"bad url", `{"sessionId":"s","servers":[{"name":"a","transport":"sse","url":"http:///sekrit"}]}`, `input.servers[0].url`},
		{"header line break", `{"sessionId":"s","servers":[{"name":"a","transport":"http","url":"http://x","headers":[{"name":"A","value":"sekrit\n"}]}]}`, `input.servers[0].headers[0].value`},
		{"header twice", `{"sessionId":"s","servers":[{"name":"a","transport":"http","url":"http://x","headers":[{"name":"A","value":"1"},{"name":"a","value":"sekrit"}]}]}`, `input.servers[0].headers[1].name`},
		{"env NUL", `{"sessionId":"s","servers":[{"name":"a","transport":"stdio","command":"/bin/a","env":[{"name":"K","value":"sekrit\u0000"}]}]}`, `input.servers[0].env[0].value`},
		{"twice", `{"sessionId":"s","servers":[` + stdio + `,` + stdio + `]}`, `input.servers[1].name`},
		{"added and removed", `{"sessionId":"s","servers":[` + stdio + `],"remove":["a"]}`, `input.remove[0]`},
		{"removed twice", `{"sessionId":"s","remove":["b","b"]}`, `input.remove[1]`},
		{"bad removal", `{"sessionId":"s","remove":["a b"]}`, `input.remove[0]`},
		{"unknown field", `{"sessionId":"s","servers":[{"name":"a","transport":"stdio","command":"/bin/a","cwd":"/"}]}`, `cwd`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in protocol.SessionMCPSetInput
			err := protocol.DecodeInput(json.RawMessage(c.input), &in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
			if strings.Contains(err.Error(), "sekrit") {
				t.Errorf("the error quotes a value: %v", err)
			}
		})
	}
	var in protocol.SessionMCPSetInput
	if err := protocol.DecodeInput(json.RawMessage(`{"sessionId":"s","servers":[`+stdio+`,{"name":"w","transport":"http","url":"https://u:p@x/mcp?key=k#f","headers":[{"name":"Authorization","value":"Bearer k"}]}]}`), &in); err != nil {
		t.Fatal(err)
	}
	servers := in.Servers
	if info := servers[1].Info(); info.URL != "https://x/mcp" || len(info.Headers) != 1 || info.Headers[0] != "Authorization" {
		t.Errorf("info: %+v", info)
	}
}

func FuzzSessionMCPServersNeverQuoteAValue(f *testing.F) {
	f.Add("a", "stdio", "/bin/a", "K", "v", "http://x")
	f.Add("a b", "http", "", "Authorization", "Bearer x\n", "ftp://v@x")
	f.Fuzz(func(t *testing.T, name, transport, command, key, value, url string) {
		const marker = "SEKRIT"
		s := protocol.SessionMCPServer{Name: name, Transport: transport, Command: command, URL: url + marker}
		s.Env = []protocol.NameValue{{Name: key, Value: value + marker}}
		s.Headers = []protocol.NameValue{{Name: key, Value: value + marker}}
		err := protocol.ValidSessionMCPServers("servers", []protocol.SessionMCPServer{s})
		if err != nil && strings.Contains(err.Error(), marker) && !strings.Contains(name+command+key+transport, marker) {
			t.Errorf("the error quotes a value or a URL: %v", err)
		}
	})
}
