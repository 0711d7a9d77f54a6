package backoff

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestNextGrowsToMaxWithFullJitter(t *testing.T) {
	one := func() float64 { return 0.999999 }
	b := &Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second, ResetAfter: time.Minute, Rand: one}
	now := time.Unix(1000, 0)
	want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000}
	for i, w := range want {
		w *= time.Millisecond
		if c := b.Ceiling(); c != w {
			t.Fatalf("attempt %d: ceiling %v, want %v", i, c, w)
		}
		d := b.Next(now)
		if d >= w || d < w*99/100 {
			t.Fatalf("attempt %d: delay %v, want just under %v", i, d, w)
		}
		now = now.Add(d + time.Second) // the attempt fails after a second
	}
}

func TestNextIsUniformBelowCeiling(t *testing.T) {
	b := &Backoff{Initial: time.Second, Max: time.Second, ResetAfter: time.Hour}
	now := time.Unix(0, 0)
	var low, high int
	for range 10000 {
		d := b.Next(now)
		if d < 0 || d >= time.Second {
			t.Fatalf("delay %v outside [0, 1s)", d)
		}
		if d < 100*time.Millisecond {
			low++
		}
		if d >= 900*time.Millisecond {
			high++
		}
	}
	// Full jitter: both ends of the window are used (about 1,000 each).
	if low < 700 || high < 700 {
		t.Fatalf("delays not spread over the window: %d below 100ms, %d above 900ms", low, high)
	}
}

func TestNextResetsAfterQuietPeriod(t *testing.T) {
	b := &Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, ResetAfter: time.Minute, Rand: func() float64 { return 0.5 }}
	now := time.Unix(0, 0)
	for range 5 {
		now = now.Add(b.Next(now) + time.Second)
	}
	if c := b.Ceiling(); c != 3200*time.Millisecond {
		t.Fatalf("ceiling after 5 failures %v, want 3.2s", c)
	}
	// An attempt that ran for 59s (plus the delay before it) does not reset ...
	d := b.Next(now)
	now = now.Add(d + 59*time.Second)
	if got := b.Next(now); got != 3200*time.Millisecond {
		t.Fatalf("delay after a 59s attempt %v, want 3.2s (no reset)", got)
	}
	// ... one that stayed up for a minute does.
	b.Next(now)
	now = now.Add(10*time.Second + time.Minute)
	if got := b.Next(now); got != 50*time.Millisecond {
		t.Fatalf("delay after a quiet minute %v, want 50ms (reset to Initial)", got)
	}
}

func TestReset(t *testing.T) {
	b := &Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Minute}
	for range 4 {
		b.Next(time.Unix(0, 0))
	}
	b.Reset()
	if c := b.Ceiling(); c != time.Second {
		t.Fatalf("ceiling after Reset %v, want 1s", c)
	}
}

func TestDelayHonoursTheHubsRetryDelay(t *testing.T) {
	zero := func() float64 { return 0 }
	b := &Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Hour, Rand: zero}
	st, err := status.New(codes.ResourceExhausted, "too many session starts").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	refusal := fmt.Errorf("the hub ended the session: %w", st.Err())
	if got, ok := RetryAfter(refusal); !ok || got != 1500*time.Millisecond {
		t.Fatalf("RetryAfter of a wrapped refusal: %v %v, want 1.5s", got, ok)
	}
	if d := b.Delay(time.Unix(0, 0), refusal); d != 1500*time.Millisecond {
		t.Fatalf("delay after a refusal: %v, want the hub's 1.5s over the backoff's 0", d)
	}
	b.Rand = func() float64 { return 0.999999 }
	// The backoff's ceiling is now 2 s; a delay longer than the hub's wins.
	if d := b.Delay(time.Unix(10, 0), refusal); d < 1900*time.Millisecond {
		t.Fatalf("delay %v, want the backoff's longer one", d)
	}
	if _, ok := RetryAfter(status.Error(codes.Unavailable, "connection refused")); ok {
		t.Fatal("RetryAfter of a status without RetryInfo: want false")
	}
	if _, ok := RetryAfter(errors.New("plain")); ok {
		t.Fatal("RetryAfter of a plain error: want false")
	}
}

func TestDelayAfterARefusedConnectIsShort(t *testing.T) {
	b := &Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second, ResetAfter: time.Hour, RefusedMax: time.Second,
		Rand: func() float64 { return 0.999999 }}
	// A real refused connect, carried as gRPC carries it: the text of an Unavailable status.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	_, dialErr := net.Dial("tcp", addr)
	if dialErr == nil || !Refused(dialErr) {
		t.Fatalf("dial of a closed port: %v, want a refusal", dialErr)
	}
	refused := status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: "+dialErr.Error()+"\"")
	if !Refused(refused) {
		t.Fatalf("Refused(%v) = false", refused)
	}
	other := status.Error(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: EOF\"")
	now := time.Unix(0, 0)
	for i := range 10 {
		if d := b.Delay(now, refused); d > time.Second {
			t.Fatalf("attempt %d: delay %v after a refused connect, want at most RefusedMax 1s", i, d)
		}
	}
	// Any other failure keeps the grown backoff: its ceiling is 30 s by now.
	if d := b.Delay(now, other); d < 29*time.Second {
		t.Fatalf("delay %v after a failed handshake, want the backoff's ~30s", d)
	}
	if Refused(nil) || Refused(errors.New("i/o timeout")) {
		t.Fatal("Refused of nil or a timeout: want false")
	}
}
