package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*DNSRecord)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=dnsrecords,singular=dnsrecord,shortName=dns
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The DNS record provider type."
// +kubebuilder:printcolumn:name="Domain Name",JSONPath=".spec.name",type=string,description="The DNS record domain name."
// +kubebuilder:printcolumn:name="Record Type",JSONPath=".spec.recordType",type=string,description="The DNS record type (A, CNAME, or TXT)."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date

// DNSRecord asks the DNS provider extension for one DNS record set: the shoot's internal, external and ingress
// records, and the seed's ingress record.
type DNSRecord struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired record; immutable once the object is being deleted.
	Spec DNSRecordSpec `json:"spec"`
	// +optional
	Status DNSRecordStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *DNSRecord) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *DNSRecord) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// DNSRecordList is a list of DNSRecords.
type DNSRecordList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the DNSRecords.
	Items []DNSRecord `json:"items"`
}

// DNSRecordType is the type of a DNS record.
type DNSRecordType string

// DNS record types. Gardener supports A, AAAA, CNAME and TXT.
const (
	// DNSRecordTypeA is an IPv4 address record.
	DNSRecordTypeA DNSRecordType = "A"
	// DNSRecordTypeAAAA is an IPv6 address record.
	DNSRecordTypeAAAA DNSRecordType = "AAAA"
	// DNSRecordTypeCNAME is a canonical name record; it has exactly one value.
	DNSRecordTypeCNAME DNSRecordType = "CNAME"
	// DNSRecordTypeTXT is a text record.
	DNSRecordTypeTXT DNSRecordType = "TXT"
)

// DNSRecordSpec is the spec of a DNSRecord.
type DNSRecordSpec struct {
	DefaultSpec `json:",inline"`
	// SecretRef points at the secret holding the DNS provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
	// Region is the provider region of the record; unset means the region of the secret, else the extension's default.
	// +optional
	Region *string `json:"region,omitempty"`
	// Zone is the hosted zone of the record; unset means the extension finds the zone whose name is the longest
	// suffix of Name.
	// +optional
	Zone *string `json:"zone,omitempty"`
	// Name is the fully qualified domain name, e.g. "api.<shoot domain>". Immutable.
	Name string `json:"name"`
	// RecordType is A, AAAA, CNAME or TXT. Immutable.
	RecordType DNSRecordType `json:"recordType"`
	// Values are the IP addresses (A, AAAA), the one host name (CNAME) or the texts (TXT) of the record.
	Values []string `json:"values"`
	// TTL is the time to live in seconds; unset means 120.
	// +optional
	TTL *int64 `json:"ttl,omitempty"`
}

// DNSRecordStatus is the status of a DNSRecord.
type DNSRecordStatus struct {
	DefaultStatus `json:",inline"`
	// Zone is the hosted zone the record was written to.
	// +optional
	Zone *string `json:"zone,omitempty"`
}
