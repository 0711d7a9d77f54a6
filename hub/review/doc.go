// Package review owns the access reviews a user asks about itself, as kube-apiserver serves them:
// SelfSubjectAccessReview and SelfSubjectRulesReview (authorization.k8s.io/v1) and SelfSubjectReview
// (authentication.k8s.io/v1), the endpoints behind `kubectl auth can-i`, `kubectl auth can-i --list` and
// `kubectl auth whoami`. The answers are the hub's authorizer's (api.Authorizer, package authz): a review asks it
// exactly what the request it describes would ask, so the answer cannot differ from what the request would get.
package review
