package controller

import "github.com/trellis-dev/trellis/hub/store"

// LaneWrites is the write limiter of l's reconciliations.
func LaneWrites(l *Lane) store.WriteLimiter { return laneWrites{l} }
