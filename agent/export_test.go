package agent

// WaitMapped is waitMapped, for tests.
var WaitMapped = waitMapped
