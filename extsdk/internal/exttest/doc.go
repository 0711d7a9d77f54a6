// Package exttest owns the test environment of extsdk's packages: a real seed (test/seedtest) with the extension
// CRDs installed, a controller-runtime manager per test watching that test's namespace, a recorder of the manager's
// log lines to wait on, and helpers to write Clusters and wait for conditions. Only tests import it.
package exttest
