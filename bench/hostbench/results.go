package main

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/table"
)

type latencyResult struct {
	q                    quantiles
	serverCPU, clientCPU time.Duration
}

type pipelineResult struct {
	conns                            int
	agentd, json                     float64 // requests/s, median of rounds
	ratio                            float64 // median of the per-round ratios
	agentdServerCPU, agentdClientCPU time.Duration
	jsonServerCPU, jsonClientCPU     time.Duration
}

// results is everything one run measured.
type results struct {
	latency   map[string]latencyResult
	pipelines []pipelineResult

	rssAgentd, rssJSON, rssRaw int64
	rssAgentdLoaded            int64
	partial                    partialResult

	tmux                bool
	cold, warm, version cliResult
	warmCgo             cliResult // the plain go build (cgo where a C toolchain is)
	hostStart           cliResult // `agentd host` until its registration says ready
	tmuxList, tmuxCold  cliResult
}

// Goals.
const (
	goalP50        = 1.2  // agentd host.status p50 ≤ 1.2× the JSON echo's
	goalP99        = 2.0  // p99 ≤ 2× the JSON echo's
	goalThroughput = 0.70 // pipelined requests/s ≥ 70% of the JSON echo's
	goalRSS        = 20 << 20
	goalWarmVsTmux = 1.0 // warm `agentd status` median ≤ tmux list-sessions median
	// What 1,000 connections holding half-sent large requests add to the
	// host's RSS with them idle, and the host's RSS over idle
	// partialReturn after they close.
	goalPartialHeld  = 64 << 20
	goalPartialAfter = partialBackMargin
)

func (r *results) rows() []row {
	var rows []row
	nan := math.NaN()
	if a, ok := r.latency[tAgentd]; ok {
		j, raw := r.latency[tJSONEcho], r.latency[tRawEcho]
		p50 := table.Ratio(a.q.p50, j.q.p50)
		p99 := table.Ratio(a.q.p99, j.q.p99)
		rows = append(rows,
			row{"host.status p50, 1 conn sequential", us(a.q.p50), us(j.q.p50) + " json echo", p50, fmt.Sprintf("≤ %.1f×", goalP50), table.Verdict(p50 <= goalP50)},
			row{"host.status p99, 1 conn sequential", us(a.q.p99), us(j.q.p99) + " json echo", p99, fmt.Sprintf("≤ %.1f×", goalP99), table.Verdict(p99 <= goalP99)},
			row{"host.status p50 vs raw line echo", us(a.q.p50), us(raw.q.p50) + " raw echo", table.Ratio(a.q.p50, raw.q.p50), "-", "info"},
			row{"host.status p99 vs raw line echo", us(a.q.p99), us(raw.q.p99) + " raw echo", table.Ratio(a.q.p99, raw.q.p99), "-", "info"},
			row{"server CPU per host.status", us(a.serverCPU), us(j.serverCPU) + " json echo", table.Ratio(a.serverCPU, j.serverCPU), "-", "info"},
			row{"client CPU per host.status", us(a.clientCPU), us(j.clientCPU) + " json client", table.Ratio(a.clientCPU, j.clientCPU), "-", "info"},
		)
	}
	for _, p := range r.pipelines {
		q := p.ratio
		rows = append(rows,
			row{fmt.Sprintf("pipelined req/s, %d conn × 64", p.conns), fmt.Sprintf("%.0f", p.agentd), fmt.Sprintf("%.0f json echo", p.json), q, fmt.Sprintf("≥ %.2f×", goalThroughput), table.Verdict(q >= goalThroughput)},
			row{fmt.Sprintf("  server CPU per request, %d × 64", p.conns), us(p.agentdServerCPU), us(p.jsonServerCPU) + " json echo", table.Ratio(p.agentdServerCPU, p.jsonServerCPU), "-", "info"},
			row{fmt.Sprintf("  client CPU per request, %d × 64", p.conns), us(p.agentdClientCPU), us(p.jsonClientCPU) + " json client", table.Ratio(p.agentdClientCPU, p.jsonClientCPU), "-", "info"},
		)
	}
	if r.rssAgentd > 0 {
		rows = append(rows, row{"idle host RSS after start", mib(r.rssAgentd), mib(r.rssJSON) + " json echo", float64(r.rssAgentd) / float64(r.rssJSON), "≤ 20 MiB", table.Verdict(r.rssAgentd <= goalRSS)})
		if r.rssAgentdLoaded > 0 {
			rows = append(rows, row{"host RSS after the pipelined runs", mib(r.rssAgentdLoaded), "-", nan, "-", "info"})
		}
	}
	if p := r.partial; p.idle > 0 {
		perConn, anchorPerConn := perConnKiB(p.conns, p.idle), perConnKiB(p.anchorConns, p.anchorIdle)
		rows = append(rows,
			row{"idle memory a connection", fmt.Sprintf("%.1f KiB", perConn), fmt.Sprintf("%.1f KiB raw echo", anchorPerConn), perConn / anchorPerConn, "-", "info"},
			row{fmt.Sprintf("%d half-sent 780 KB requests: RSS added", partialConns), "+" + mib(p.held-p.conns), mib(p.conns) + " idle conns", float64(p.held) / float64(p.conns), "≤ +64 MiB", table.Verdict(p.held-p.conns <= goalPartialHeld)},
			row{fmt.Sprintf("  RSS over the idle host %s after they close", partialReturn), "+" + mib(p.after-p.idle), mib(p.idle) + " idle host", float64(p.after) / float64(p.idle), "≤ +" + mib(goalPartialAfter), table.Verdict(p.after-p.idle <= goalPartialAfter)},
		)
	}
	if r.warm.runs > 0 {
		anchor := func(d time.Duration) string {
			if !r.tmux {
				return "no tmux"
			}
			return ms(d) + " tmux ls"
		}
		rq := func(a, t time.Duration) float64 {
			if !r.tmux {
				return nan
			}
			return table.Ratio(a, t)
		}
		warmGoal, warmVerdict := "≤ 1.0× tmux", "skipped"
		if r.tmux {
			warmVerdict = table.Verdict(table.Ratio(r.warm.p50, r.tmuxList.p50) <= goalWarmVsTmux)
		}
		rows = append(rows,
			row{fmt.Sprintf("cold `agentd status` p50 (%d runs)", r.cold.runs), ms(r.cold.p50), anchor(r.tmuxList.p50), rq(r.cold.p50, r.tmuxList.p50), "-", "info"},
			row{"cold `agentd status` p90", ms(r.cold.p90), anchor(r.tmuxList.p90), rq(r.cold.p90, r.tmuxList.p90), "-", "info"},
		)
		rows = append(rows, row{"  of which `agentd host` start → ready p50", ms(r.hostStart.p50), anchor(r.tmuxList.p50), rq(r.hostStart.p50, r.tmuxList.p50), "-", "info"})
		if r.tmux {
			rows = append(rows, row{"  beside tmux cold `new-session -d` p50", ms(r.cold.p50), ms(r.tmuxCold.p50) + " tmux new", table.Ratio(r.cold.p50, r.tmuxCold.p50), "-", "info"})
		}
		rows = append(rows,
			row{fmt.Sprintf("warm `agentd status` p50 (%d runs)", r.warm.runs), ms(r.warm.p50), anchor(r.tmuxList.p50), rq(r.warm.p50, r.tmuxList.p50), warmGoal, warmVerdict},
			row{"warm `agentd status` p90", ms(r.warm.p90), anchor(r.tmuxList.p90), rq(r.warm.p90, r.tmuxList.p90), "-", "info"},
			row{"  `agentd version` p50 (no host contact)", ms(r.version.p50), anchor(r.tmuxList.p50), rq(r.version.p50, r.tmuxList.p50), "-", "info"},
		)
		if r.warmCgo.runs > 0 {
			rows = append(rows, row{"  warm status p50, plain go build", ms(r.warmCgo.p50), anchor(r.tmuxList.p50), rq(r.warmCgo.p50, r.tmuxList.p50), "-", "info"})
		}
	}
	return rows
}

func (r *results) print(w io.Writer) { table.Print(w, r.rows(), 2) }

// row is one line of the results table.
type row table.Row
