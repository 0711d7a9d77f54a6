// Command cli measures how fast trellisctl starts: the time from starting `trellisctl version` to the first byte
// it prints, over many runs, beside the same measurement of the peer built in the same run, `kubectl version
// --client` (k8s.io/kubernetes at the Makefile's KUBE_VERSION, built by test/testbin/build-kube.sh into the testbin
// cache). `make bench-cli` builds both and runs it; the results go to bin/bench/cli.json.
package main
