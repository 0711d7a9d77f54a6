// Package kubeproto owns Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf) of the Kubernetes
// kinds the hub serves (Namespace, Secret, ConfigMap, Event, ServiceAccount, Lease, CertificateSigningRequest,
// ClusterRole): kubectl's typed commands (`kubectl create namespace`, `create configmap`, `create secret`) and
// client-go controllers send them so. It translates rather than adding a codec: a protobuf body is decoded into
// k8s.io/api's own type with apimachinery's serializer and handed on as that type's JSON, which the kinds' servers
// read as any JSON body; an answer asked for in protobuf is the JSON answer decoded into the k8s.io/api type and
// encoded with the same serializer. Gardener's kinds have no k8s.io/api type here, so their protobuf stays 415.
package kubeproto
