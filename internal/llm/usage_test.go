package llm

import (
	"math"
	"testing"
)

// Usage adds up call by call; the sum has a cost only when every call that
// used tokens had one.
func TestUsageAddsUpAndKeepsACostOnlyWhenEveryCallHadOne(t *testing.T) {
	price := Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}
	a := price.Priced(Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 1000})
	b := price.Priced(Usage{InputTokens: 10, CacheWriteTokens: 2000})
	unpriced := Usage{InputTokens: 5, OutputTokens: 5}

	sum := Usage{}.Add(a).Add(b)
	want := (110*3 + 20*15 + 1000*0.30 + 2000*3.75) / 1e6
	if sum.InputTokens != 110 || sum.OutputTokens != 20 || sum.CacheReadTokens != 1000 || sum.CacheWriteTokens != 2000 || !sum.Priced || math.Abs(sum.Cost-want) > 1e-12 {
		t.Errorf("sum = %+v, want cost %v", sum, want)
	}
	if got := sum.Add(Usage{}); got != sum {
		t.Errorf("adding a call that reported nothing changed the sum: %+v", got)
	}
	if got := sum.Add(unpriced); got.Priced || got.Cost != 0 || got.InputTokens != 115 {
		t.Errorf("with a call of unknown cost: %+v, want tokens and no cost", got)
	}
	if got := unpriced.Add(a); got.Priced {
		t.Errorf("a call of unknown cost first: %+v, want no cost", got)
	}
}
