package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/agentd-dev/agentd/protocol"

	"github.com/agentd-dev/agentd/bench/internal/table"
)

// results is everything one run measured.
type results struct {
	run    runResults
	stream streamResults
	ls     lsResults
	attach attachResults
	fanout fanoutResults
	flood  floodResults
	pty    ptyResults
	web    webResults
}

// Goals, from the issue.
const (
	goalColdVsPi   = 0.10    // cold `agentd run "hi"` ≤ 1/10 of pi's time to ready
	goalRSSVsPi    = 1.0 / 7 // idle worker RSS ≤ 1/7 of pi's idle RSS
	goalDeltaRate  = 50000   // deltas/s reaching a subscribed client
	goalAttach     = 2.0     // `agentd attach` to its first full screen ≤ 2× tmux attach
	goalLatencyP99 = 5 * time.Millisecond
	goalLs         = 100 * time.Millisecond

	goalFanP99Ratio = 1.5             // others' p99 with a stalled subscriber ≤ 1.5× without
	goalEviction    = 5 * time.Second // the stalled subscriber evicted within
	goalFanRSS      = 32 << 20        // host RSS growth with a stalled subscriber
)

func (b *bench) rows() []row {
	var rows []row
	nan := math.NaN()
	r := &b.res
	if !b.cfg.skip["run"] {
		pi := b.pi.unavailable == "" && r.run.piReady.n > 0
		piAnchor := func(s string) string {
			if !pi {
				return "pi unavailable"
			}
			return s + " pi ready"
		}
		q := func(a time.Duration, p time.Duration) float64 {
			if !pi {
				return nan
			}
			return table.Ratio(a, p)
		}
		coldQ := q(r.run.cold.p50, r.run.piReady.p50)
		coldVerdict := "n/a (no anchor)"
		if pi {
			coldVerdict = table.Verdict(coldQ <= goalColdVsPi)
		}
		rows = append(rows,
			row{fmt.Sprintf("cold `agentd run \"hi\"` p50 (n=%d)", r.run.cold.n), dur(r.run.cold.p50), piAnchor(dur(r.run.piReady.p50)), coldQ, "≤ 0.10×", coldVerdict},
			row{"cold `agentd run \"hi\"` p90", dur(r.run.cold.p90), piAnchor(dur(r.run.piReady.p90)), q(r.run.cold.p90, r.run.piReady.p90), "-", "info"},
			row{fmt.Sprintf("warm `agentd run --session` p50 (n=%d)", r.run.warm.n), dur(r.run.warm.p50), piAnchor(dur(r.run.piReady.p50)), q(r.run.warm.p50, r.run.piReady.p50), "-", "info"},
			row{"warm `agentd run --session` p90", dur(r.run.warm.p90), piAnchor(dur(r.run.piReady.p90)), q(r.run.warm.p90, r.run.piReady.p90), "-", "info"},
			row{fmt.Sprintf("warm host, new session p50 (n=%d)", r.run.newSession.n), dur(r.run.newSession.p50), piAnchor(dur(r.run.piReady.p50)), q(r.run.newSession.p50, r.run.piReady.p50), "-", "info"},
		)
		rssAnchor := func() string {
			if !pi {
				return "pi unavailable"
			}
			return mib(r.run.piRSS) + " pi idle"
		}
		rq := func(a int64) float64 {
			if !pi || r.run.piRSS == 0 {
				return nan
			}
			return float64(a) / float64(r.run.piRSS)
		}
		rssVerdict := "n/a (no anchor)"
		if pi {
			rssVerdict = table.Verdict(rq(r.run.workerRSS) <= goalRSSVsPi)
		}
		rows = append(rows,
			row{fmt.Sprintf("idle worker RSS (after %d turns)", r.run.warmTurns), mib(r.run.workerRSS), rssAnchor(), rq(r.run.workerRSS), "≤ 0.143× (1/7)", rssVerdict},
			row{"  of which private (anon) / file-backed", r.run.workerMem.split(), piSplit(pi, r.run.piMem), rq(r.run.workerMem.anon), "-", "info"},
			row{"  PSS (shared pages divided among their users)", mib(r.run.workerMem.pss), piPss(pi, r.run.piMem), rqPss(pi, r.run.workerMem.pss, r.run.piMem.pss), "-", "info"},
			row{"idle worker RSS (after 1 turn, median)", mib(r.run.oneTurnRSS), rssAnchor(), rq(r.run.oneTurnRSS), "-", "info"},
			row{"idle host RSS", mib(r.run.hostRSS), rssAnchor(), rq(r.run.hostRSS), "-", "info"},
		)
	}
	if s := &r.stream; !b.cfg.skip["stream"] && len(s.anchor) > 0 {
		anchor := median(s.anchor)
		label := fmt.Sprintf("text deltas/s to a subscribed client (%dk in one turn)", s.deltas/1000)
		if s.streamErr != "" {
			rows = append(rows, row{label, fmt.Sprintf("stalled: %d of %d arrived", s.delivered, s.deltas), fmt.Sprintf("%.0f/s raw socket", anchor), nan, "≥ 50000/s", "FAIL"})
			if len(s.rates) > 0 {
				rate := median(s.rates)
				rows = append(rows, row{fmt.Sprintf("  rounds that did not stall (%d of %d)", len(s.rates), len(s.anchor)), fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("%.0f/s raw socket", anchor), rate / anchor, "≥ 50000/s", table.Verdict(rate >= goalDeltaRate)})
			}
		} else {
			rate := median(s.rates)
			rows = append(rows,
				row{label + fmt.Sprintf(", median of %d", len(s.rates)), fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("%.0f/s raw socket", anchor), rate / anchor, "≥ 50000/s", table.Verdict(rate >= goalDeltaRate && s.lossless)},
				row{"  turn.start → run_end (median)", dur(medianDur(s.turnTimes)), "-", nan, "-", "info"},
			)
		}
		if len(s.rates) > 0 {
			rows = append(rows, row{"  CPU per delta: worker / host / client", cpuPer(s.workerCPU, s.cpuDeltas) + " / " + cpuPer(s.hostCPU, s.cpuDeltas) + " / " + cpuPer(s.clientCPU, s.cpuDeltas), "-", nan, "-", "info"})
		}
		if len(s.workerRate) > 0 {
			wr := median(s.workerRate)
			rows = append(rows, row{"  the worker's turn alone (its transcript's turn_start → turn_end)", fmt.Sprintf("%.0f/s", wr), fmt.Sprintf("%.0f/s raw socket", anchor), wr / anchor, "-", "info"})
		}
		if len(s.paced) > 0 {
			p := median(s.paced)
			rows = append(rows, row{fmt.Sprintf("  paced: bursts of %d deltas 1ms apart, delivered", pacedBurst), fmt.Sprintf("%.0f/s", p), fmt.Sprintf("%.0f/s raw socket", anchor), p / anchor, "-", "info"})
		} else if s.pacedErr != "" {
			rows = append(rows, row{fmt.Sprintf("  paced: bursts of %d deltas 1ms apart", pacedBurst), "failed", "-", nan, "-", "info"})
		}
		if !s.lossless && s.streamErr == "" {
			rows = append(rows, row{"  every delta's text arrived", "no", "-", nan, "lossless", "FAIL"})
		}
		if s.latency.n > 0 {
			rows = append(rows,
				row{fmt.Sprintf("worker → client latency p50 (n=%d)", s.latency.n), dur(s.latency.p50), dur(s.status.p50) + " host.status RTT", table.Ratio(s.latency.p50, s.status.p50), "-", "info"},
				row{"worker → client latency p99", dur(s.latency.p99), dur(s.status.p99) + " host.status RTT", table.Ratio(s.latency.p99, s.status.p99), "≤ 5 ms", table.Verdict(s.latency.p99 <= goalLatencyP99)},
				row{"worker → client latency max", dur(s.latency.max), dur(s.status.max) + " host.status RTT", table.Ratio(s.latency.max, s.status.max), "-", "info"},
			)
		} else {
			rows = append(rows, row{"worker → client latency", "not measured", s.latencyErr, nan, "≤ 5 ms", "n/a"})
		}
	}
	if l := &r.ls; !b.cfg.skip["ls"] {
		for i, m := range l.at {
			goal, judge := "-", "info"
			if i == len(l.at)-1 {
				goal, judge = "≤ 100 ms", table.Verdict(m.lsJSON.p50 <= goalLs && m.err == "" && m.lsJSON.n > 0)
			}
			label := fmt.Sprintf("`agentd ls --json`, %d sessions, p50", m.sessions)
			if m.lsJSON.n == 0 {
				rows = append(rows, row{label, "error", dur(m.dirLs.p50) + " ls of folder", nan, goal, judge})
			} else {
				rows = append(rows,
					row{label + fmt.Sprintf(" (n=%d)", m.lsJSON.n), dur(m.lsJSON.p50), dur(m.dirLs.p50) + " ls of folder", table.Ratio(m.lsJSON.p50, m.dirLs.p50), goal, judge},
					row{"  p90", dur(m.lsJSON.p90), dur(m.dirLs.p90) + " ls of folder", table.Ratio(m.lsJSON.p90, m.dirLs.p90), "-", "info"},
				)
				if l.tmux {
					rows = append(rows, row{"  p50 beside tmux", dur(m.lsJSON.p50), dur(m.tmuxList.p50) + " tmux ls (1)", table.Ratio(m.lsJSON.p50, m.tmuxList.p50), "-", "info"})
				}
			}
			if m.lsTable.n > 0 {
				rows = append(rows, row{"  `agentd ls` (table) p50", dur(m.lsTable.p50), dur(m.dirLs.p50) + " ls of folder", table.Ratio(m.lsTable.p50, m.dirLs.p50), "-", "info"})
			} else if m.tableErr != "" {
				rows = append(rows, row{"  `agentd ls` (table)", "error", "-", nan, "-", "info"})
			}
			if m.list.n > 0 {
				rows = append(rows, row{fmt.Sprintf("  session.list in process p50 (%.2f MB)", float64(m.listBytes)/1e6), dur(m.list.p50), "-", nan, "-", "info"})
			} else if m.listErr != "" {
				rows = append(rows, row{"  session.list in process", "error", "-", nan, "-", "info"})
			}
		}
		if l.createRate > 0 {
			rows = append(rows, row{fmt.Sprintf("  session.create, %d in flight on 1 conn", protocol.ClientInFlightDomainRequests), fmt.Sprintf("%.0f/s", l.createRate), "-", nan, "-", "info"})
		}
	}
	if a := &r.attach; !b.cfg.skip["attach"] {
		label := fmt.Sprintf("`agentd attach` to first full screen, %d records, p50 (n=%d)", a.records, a.agentd.n)
		switch {
		case a.err != "" && a.agentd.n == 0:
			rows = append(rows, row{"`agentd attach` to first full screen", "failed", dur(a.tmux.p50) + " tmux attach", nan, "≤ 2×", "FAIL"})
		case a.tmux.n == 0:
			rows = append(rows, row{label, dur(a.agentd.p50), "tmux unavailable", nan, "≤ 2×", "n/a (no anchor)"})
		default:
			q := table.Ratio(a.agentd.p50, a.tmux.p50)
			rows = append(rows,
				row{label, dur(a.agentd.p50), dur(a.tmux.p50) + " tmux attach", q, "≤ 2×", table.Verdict(q <= goalAttach)},
				row{"  p90", dur(a.agentd.p90), dur(a.tmux.p90) + " tmux attach", table.Ratio(a.agentd.p90, a.tmux.p90), "-", "info"},
				row{"  max", dur(a.agentd.max), dur(a.tmux.max) + " tmux attach", table.Ratio(a.agentd.max, a.tmux.max), "-", "info"},
				row{"  exec → the screen first shows any text, p50", dur(a.agentdFirst.p50), dur(a.tmuxFirst.p50) + " tmux attach", table.Ratio(a.agentdFirst.p50, a.tmuxFirst.p50), "-", "info"},
			)
			rows = append(rows, a.starts.rows(a.tmux)...)
		}
		switch {
		case a.pageErr != "":
			rows = append(rows, row{"web page to its first screen", "failed: " + a.pageErr, "-", nan, "< 300ms", "FAIL"})
		case a.page.n > 0:
			rows = append(rows, row{fmt.Sprintf("web page, navigation → its first screen, %d records, p50 (n=%d)", a.records, a.page.n), dur(a.page.p50), dur(a.agentd.p50) + " agentd attach", table.Ratio(a.page.p50, a.agentd.p50), "< 300ms", table.Verdict(a.page.p50 < goalPage)})
		}
		if a.coldAgent.n > 0 {
			rows = append(rows, row{fmt.Sprintf("  worker stopped first (the attach starts it), p50 (n=%d)", a.coldAgent.n), dur(a.coldAgent.p50), dur(a.tmux.p50) + " tmux attach", table.Ratio(a.coldAgent.p50, a.tmux.p50), "-", "info"})
		}
	}
	if !b.cfg.skip["fanout"] {
		rows = append(rows, r.fanout.rows()...)
	}
	if !b.cfg.skip["flood"] {
		rows = append(rows, r.flood.rows()...)
	}
	if !b.cfg.skip["pty"] {
		rows = append(rows, r.pty.rows()...)
	}
	if !b.cfg.skip["web"] {
		rows = append(rows, r.web.rows()...)
	}
	return rows
}

func piSplit(ok bool, m memory) string {
	if !ok {
		return "pi unavailable"
	}
	return m.split() + " pi"
}

func piPss(ok bool, m memory) string {
	if !ok {
		return "pi unavailable"
	}
	return mib(m.pss) + " pi"
}

func rqPss(ok bool, a, b int64) float64 {
	if !ok || b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func medianDur(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func cpuPer(total time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fµs", float64(total)/float64(time.Microsecond)/float64(n))
}

func (b *bench) printResults(w io.Writer) {
	table.Print(w, b.rows(), 3)
	if b.pi.unavailable != "" && !b.cfg.skip["run"] {
		fmt.Fprintf(w, "\npi %s: the rows measured against it have no ratio and no verdict.\n", b.pi.unavailable)
	}
	if s := b.res.stream; s.streamErr != "" {
		fmt.Fprintf(w, "\nthe streamed turn did not reach the client whole: %s\n", s.streamErr)
		for _, d := range s.diagnosis {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	if s := b.res.stream; s.pacedErr != "" {
		fmt.Fprintf(w, "\nthe paced turn did not reach the client whole: %s\n", s.pacedErr)
	}
	for _, m := range b.res.ls.at {
		if m.err != "" {
			fmt.Fprintf(w, "\n`agentd ls --json` over %d sessions failed: %s\n", m.sessions, m.err)
		}
	}
}

// row is one line of the results table.
type row table.Row
