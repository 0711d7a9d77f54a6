// Package table owns the hub's server-side printing: Kubernetes' Table representation (meta.k8s.io/v1 and v1beta1
// Table, asked for with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, as kubectl get does) of gets and
// lists, with the kinds' printer columns of package proto/columns — the columns trellisctl shows, one definition.
package table
