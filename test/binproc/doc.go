// Package binproc owns the real binaries that tests and benchmarks run as child processes: building them (Build, which
// links each set of packages once per machine and copies it out), running one with its flags, environment and log file
// (Process: start, restart, read or tail the log of the current run, stop by pid with SIGTERM and then SIGKILL, kill,
// and how the run exited), and, for trellis-hub, waiting until it is ready (Hub: /readyz answers 200 over TLS with the
// CA from its data dir, the admin token is there) and talking to it as the admin (Hub.Do); and several trellis-hub
// replicas on one external etcd (StartReplicas: the encryption keys and admin token they share, a data dir and log
// each; Hub.IsLeader tells from the log which one runs the loops).
//
// Children are started in their own process groups, so a terminal's Ctrl-C reaches only the parent, which stops them
// in order; on Linux they also get a parent-death signal, so they die with the parent even when it is killed. The
// package runs on Unix systems only.
package binproc
