// Package hubdial owns how an agent connects to the hub: the TCP dial timeout, kept apart from the TLS handshake's
// generous one, keepalive, and the receive windows. The agent and the simulated agents of the load generator
// (test/agentsim) dial with the same options, so a benchmarked fleet behaves like real agents in a storm.
package hubdial
