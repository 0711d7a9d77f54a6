package timescale

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Env is the environment variable holding the factor.
const Env = "TRELLIS_TEST_TIMEOUT_SCALE"

var factor = sync.OnceValue(func() float64 {
	f, err := parse(os.Getenv(Env))
	if err != nil {
		panic(err)
	}
	return f
})

// parse reads the factor: empty is 1; otherwise a finite number of at least 1.
func parse(s string) (float64, error) {
	if s == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 1 && f <= 1000) {
		return 0, fmt.Errorf("%s=%q: want a number from 1 to 1000 (the factor applied to the tests' waits)", Env, s)
	}
	return f, nil
}

// Scale is d times the factor (TRELLIS_TEST_TIMEOUT_SCALE): the limit a test waits for work whose speed depends on
// the machine. It panics, naming the variable, when the variable holds anything but a number from 1 to 1000.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * factor()) }
