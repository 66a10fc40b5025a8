package web

import (
	"sync"
	"time"
)

// limiter slows failed token attempts: a bucket of Burst attempts,
// refilled at Rate a second, that each failure empties by one. While it
// is empty every attempt is refused before its token is looked at, so
// guessing is slowed to Rate a second, the right token included.
type limiter struct {
	rate  float64 // constant
	burst float64 // constant

	mu       sync.Mutex
	tokens   float64   // guarded by mu
	last     time.Time // guarded by mu
	failures int       // guarded by mu: all the failures it saw
	slowed   int       // guarded by mu: all the attempts it refused unseen
}

func newLimiter(rate float64, burst int) *limiter {
	if rate <= 0 {
		rate = 10
	}
	if burst <= 0 {
		burst = 20
	}
	return &limiter{rate: rate, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

func (l *limiter) refillLocked() {
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
}

// allow reports whether an attempt may be looked at.
func (l *limiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refillLocked()
	return l.tokens >= 1
}

// fail counts a failed attempt and returns how many there were.
func (l *limiter) fail() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refillLocked()
	l.tokens = max(0, l.tokens-1)
	l.failures++
	return l.failures
}

// slow counts an attempt refused unseen and returns how many there were.
func (l *limiter) slow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slowed++
	return l.slowed
}
