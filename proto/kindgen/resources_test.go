package main

import (
	"strings"
	"testing"
)

func TestPluralGoName(t *testing.T) {
	for _, tc := range []struct{ kind, resource, want, err string }{
		{kind: "Shoot", resource: "shoots", want: "Shoots"},
		{kind: "BackupEntry", resource: "backupentries", want: "BackupEntries"},
		{kind: "ExposureClass", resource: "exposureclasses", want: "ExposureClasses"},
		{kind: "CertificateSigningRequest", resource: "certificatesigningrequests", want: "CertificateSigningRequests"},
		{kind: "Endpoints", resource: "endpoints", err: "not a plural"},
		{kind: "Shoot", resource: "gardenshoots", err: "not a plural"},
	} {
		got, err := pluralGoName(tc.kind, tc.resource)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("pluralGoName(%s, %s) = %q, %v; want an error with %q", tc.kind, tc.resource, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("pluralGoName(%s, %s) = %q, %v; want %q", tc.kind, tc.resource, got, err, tc.want)
		}
	}
}

func TestResourceTable(t *testing.T) {
	core := func(kinds ...kind) group { return group{Group: "", Version: "v1", Kinds: kinds} }
	gardener := func(version string, kinds ...kind) group {
		return group{Group: "core.gardener.cloud", Version: version, Kinds: kinds}
	}
	t.Run("one entry per resource, named as GroupResource.String()", func(t *testing.T) {
		got, err := resourceTable([]group{
			gardener("v1", kind{Kind: "ControllerDeployment", Resource: "controllerdeployments", SeedGraph: true, Streamed: true}),
			gardener("v1beta1", kind{Kind: "ControllerDeployment", Resource: "controllerdeployments"}),
			core(kind{Kind: "Namespace", Resource: "namespaces", SeedGraph: true}),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []resource{
			{GoName: "ControllerDeployments", Name: "controllerdeployments.core.gardener.cloud", Kind: "ControllerDeployment", SeedGraph: true, Streamed: true},
			{GoName: "Namespaces", Name: "namespaces", Kind: "Namespace", SeedGraph: true},
		}
		if len(got) != len(want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("resource %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	for name, tc := range map[string]struct {
		groups []group
		err    string
	}{
		"streamed without the seed graph": {
			groups: []group{core(kind{Kind: "Secret", Resource: "secrets", Streamed: true})},
			err:    "Streamed needs SeedGraph",
		},
		"seed flags on two versions": {
			groups: []group{
				gardener("v1", kind{Kind: "ControllerDeployment", Resource: "controllerdeployments", SeedGraph: true}),
				gardener("v1beta1", kind{Kind: "ControllerDeployment", Resource: "controllerdeployments", SeedGraph: true}),
			},
			err: "set on two versions",
		},
		"one Go name for two resources": {
			groups: []group{
				core(kind{Kind: "Lease", Resource: "leases"}),
				{Group: "coordination.k8s.io", Version: "v1", Kinds: []kind{{Kind: "Lease", Resource: "leases"}}},
			},
			err: "would both be named Leases",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := resourceTable(tc.groups); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
}
