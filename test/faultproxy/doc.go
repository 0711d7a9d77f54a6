// Package faultproxy is a TCP proxy for fault tests: it listens on a loopback port, forwards every connection to a
// target address, and on request cuts every connection (CutAll), turns into a black hole that keeps connections open
// but silently drops the bytes of both directions (Blackhole), or forwards new connections to another target
// (SetTarget, for a backend restarted elsewhere). It owns its listener and its connections' goroutines; Close ends
// them all. It is a test tool: nothing outside tests imports it.
package faultproxy
