// Package csr owns the seed client CertificateSigningRequests: the deterministic request names, the checks Gardener's
// auto-approver makes (subject, no SANs, usages, requester), and the leader's controller that approves matching
// requests and signs them with the hub's CA (the hub is the signer kubernetes.io/kube-apiserver-client for seed
// client certificates). Requests that do not match stay as they are, unapproved and visible, as in Gardener.
package csr
