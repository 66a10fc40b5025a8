package proc

import (
	"errors"
	"testing"
)

func TestParseStatReadsTheFieldsAfterACommandNameOfAnyShape(t *testing.T) {
	const rest = " 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"
	cases := []struct {
		line string
		want Stat
	}{
		{"42 (agentd) S 1 42 42 0 -1 4194560 10 0 0 0 250 30 0 0 20 0 7 0 123456 0 0",
			Stat{PID: 42, Comm: "agentd", State: 'S', PPID: 1, PGRP: 42, Session: 42, MinFlt: 10, UTime: 250, STime: 30, StartTime: 123456}},
		{"7 (a b) c)) Z 3 4 5 0 0 0 6 0 0 0 8 9 0 0 0 0 0 0 77\n",
			Stat{PID: 7, Comm: "a b) c)", State: 'Z', PPID: 3, PGRP: 4, Session: 5, MinFlt: 6, UTime: 8, STime: 9, StartTime: 77}},
	}
	for _, c := range cases {
		got, err := ParseStat([]byte(c.line))
		if err != nil || got != c.want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"", "42", "42 agentd S 1", "x (a) S 1 2 3" + rest, "42 (a) S 1 2 3", "42 (a) SS 1 2 3" + rest,
		"42 (a) S x 2 3" + rest, "42 (a) S 1 2 3 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 0 1",
	} {
		if s, err := ParseStat([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) = %+v, %v; want ErrMalformed", bad, s, err)
		}
	}
}
