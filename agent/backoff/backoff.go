package backoff

import (
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backoff computes the delays before successive connection attempts. The zero value is not usable; set Initial, Max
// and ResetAfter. It is not safe for concurrent use: one reconnect loop owns it.
type Backoff struct {
	// Initial bounds the first delay.
	Initial time.Duration
	// Max bounds every delay.
	Max time.Duration
	// ResetAfter is the quiet period: when the attempt that just failed started at least this long ago (it was
	// connected and healthy for that long), the failures are not consecutive and the backoff starts over.
	ResetAfter time.Duration
	// RefusedMax, when set, bounds the delay after an attempt whose TCP connect was refused: nothing listens, the hub
	// is down or restarting, and a refused connect costs it nothing, so the agent is back within RefusedMax of the
	// hub's return instead of sleeping out a long backoff. A hub that is up and busy refuses with a retry delay
	// instead (RetryAfter), which still applies.
	RefusedMax time.Duration
	// Rand returns a number in [0, 1); nil uses math/rand/v2. Tests set it.
	Rand func() float64

	attempt      int       // consecutive failures so far
	attemptStart time.Time // when the attempt that is running began (the end of the last delay)
}

// Next returns how long to wait before the next attempt, the failure having happened at now. The delay is uniform in
// [0, min(Max, Initial·2ⁿ)) for the n-th consecutive failure (n from 0).
func (b *Backoff) Next(now time.Time) time.Duration {
	if !b.attemptStart.IsZero() && b.ResetAfter > 0 && now.Sub(b.attemptStart) >= b.ResetAfter {
		b.attempt = 0
	}
	ceiling := b.Ceiling()
	if b.attempt < 62 {
		b.attempt++
	}
	d := time.Duration(b.rand() * float64(ceiling))
	b.attemptStart = now.Add(d)
	return d
}

func (b *Backoff) rand() float64 {
	if b.Rand != nil {
		return b.Rand()
	}
	return rand.Float64()
}

// Refused reports whether err is a refused TCP connect (ECONNREFUSED), also when gRPC carries it as the text of an
// Unavailable status, which does not keep the error chain.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), syscall.ECONNREFUSED.Error())
}

// Ceiling is the bound of the next delay, without the quiet-period reset that Next may apply.
func (b *Backoff) Ceiling() time.Duration {
	ceiling := b.Initial
	for i := 0; i < b.attempt && ceiling < b.Max; i++ {
		ceiling *= 2
	}
	return min(ceiling, b.Max)
}

// Reset starts over: the next delay is bounded by Initial again.
func (b *Backoff) Reset() {
	b.attempt = 0
	b.attemptStart = time.Time{}
}

// RetryAfter returns the delay a refusal of the hub asks for: the google.rpc.RetryInfo detail of err's gRPC status
// (a hub that starts too many sessions at once refuses more with RESOURCE_EXHAUSTED and a jittered delay). false when
// err carries none.
func RetryAfter(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			return max(0, ri.GetRetryDelay().AsDuration()), true
		}
	}
	return 0, false
}

// Delay is the wait before the next attempt after err, which happened at now: the backoff's delay (bounded by
// RefusedMax when the hub's host refused the connect), or the hub's retry delay (RetryAfter) when that is longer.
func (b *Backoff) Delay(now time.Time, err error) time.Duration {
	d := b.Next(now)
	if b.RefusedMax > 0 && d > b.RefusedMax && Refused(err) {
		d = time.Duration(b.rand() * float64(b.RefusedMax))
		b.attemptStart = now.Add(d)
	}
	if after, ok := RetryAfter(err); ok && after > d {
		b.attemptStart = now.Add(after)
		return after
	}
	return d
}
