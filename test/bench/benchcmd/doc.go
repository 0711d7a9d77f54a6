// Package benchcmd owns what every benchmark command of test/bench does around its run: the run's context (it ends
// on the first SIGINT or SIGTERM, after which a second signal ends the process at once, and after the command's
// time limit), printing the report and writing it as JSON, and the exit status.
package benchcmd
