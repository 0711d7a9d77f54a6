// Package tunnel owns the hub's ends of the tunnels agents open over their outbound connections (docs/tunnels.md):
// the seed API route for cluster admins (an HTTP reverse proxy, /tunnels/seeds/<seed>/, that forwards through the
// seed's agent with impersonation of the hub user) and the SNI listener for shoot API servers, which reads the server
// name of each TLS ClientHello without terminating TLS and pipes the raw bytes to the shoot's kube-apiserver through
// its seed's agent. It enforces the tunnels' limits and exports their metrics; the tunnels themselves are the agent
// link's (hub/agentlink DialTunnel).
package tunnel
