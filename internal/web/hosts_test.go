package web

import (
	"os"
	"testing"
)

// The Host headers a listener answers to: on loopback, loopback
// addresses and localhost; on a named host, that name; on an address,
// that address; on every address, address literals and this machine's
// name. Never another name, nor another port.
func TestAListenerAnswersOnlyToItsOwnHostNames(t *testing.T) {
	name, _ := os.Hostname()
	cases := []struct {
		listen   string
		loopback bool
		host     string
		want     bool
	}{
		{"127.0.0.1", true, "127.0.0.1:8080", true},
		{"127.0.0.1", true, "localhost:8080", true},
		{"127.0.0.1", true, "[::1]:8080", true},
		{"127.0.0.1", true, "127.0.0.1:8081", false},
		{"127.0.0.1", true, "rebound.example:8080", false},
		{"127.0.0.1", true, "192.168.1.4:8080", false},
		{"127.0.0.1", true, "127.0.0.1", false},
		{"box.lan", false, "box.lan:8080", true},
		{"box.lan", false, "BOX.lan:8080", true},
		{"box.lan", false, "rebound.example:8080", false},
		{"192.168.1.4", false, "192.168.1.4:8080", true},
		{"192.168.1.4", false, "192.168.1.5:8080", false},
		{"192.168.1.4", false, "rebound.example:8080", false},
		{"0.0.0.0", false, "10.0.0.7:8080", true},
		{"0.0.0.0", false, name + ":8080", true},
		{"0.0.0.0", false, "rebound.example:8080", false},
		{"", false, "10.0.0.7:8080", true},
		{"", false, "rebound.example:8080", false},
	}
	for _, c := range cases {
		if got := allowedHosts(c.listen, c.loopback, 8080)(c.host); got != c.want {
			t.Errorf("listening on %s, Host %q: answered %v, want %v", c.listen, c.host, got, c.want)
		}
	}
}

// Failed attempts past the burst are refused unseen until the bucket
// refills; every failure and every refusal is counted.
func TestTheLimiterRefusesPastItsBurst(t *testing.T) {
	l := newLimiter(0.001, 3)
	for i := range 3 {
		if !l.allow() {
			t.Fatalf("attempt %d refused within the burst", i+1)
		}
		if n := l.fail(); n != i+1 {
			t.Fatalf("failure %d counted as %d", i+1, n)
		}
	}
	if l.allow() {
		t.Fatal("an attempt past the burst was looked at")
	}
	if n := l.slow(); n != 1 {
		t.Fatalf("the refusal counted as %d", n)
	}
}
