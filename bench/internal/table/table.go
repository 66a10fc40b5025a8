// Package table prints a bench's results: one row a metric, beside its
// anchor, with the ratio of the two and the verdict on its goal.
package table

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// Row is one metric. Ratio is NaN when there is none. A bench defines its
// own row type on it (type row table.Row) and builds rows positionally.
type Row struct {
	Metric, Agentd, Anchor string
	Ratio                  float64
	Goal, Verdict          string
}

// rowLike is Row and every type defined on it.
type rowLike interface {
	~struct {
		Metric, Agentd, Anchor string
		Ratio                  float64
		Goal, Verdict          string
	}
}

// Verdict is PASS or FAIL.
func Verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// Ratio is a ÷ b, NaN when b is zero.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// Print writes rows as an aligned table, ratios with digits decimals.
func Print[R rowLike](w io.Writer, rows []R, digits int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tagentd\tanchor\tratio\tgoal\tresult")
	for _, r := range rows {
		x := Row(r)
		q := "-"
		if !math.IsNaN(x.Ratio) && !math.IsInf(x.Ratio, 0) {
			q = fmt.Sprintf("%.*f×", digits, x.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.Metric, x.Agentd, x.Anchor, q, x.Goal, x.Verdict)
	}
	tw.Flush()
}
