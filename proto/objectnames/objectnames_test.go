package objectnames

import (
	"strings"
	"testing"
)

func TestShootOfProjectResource(t *testing.T) {
	for _, tc := range []struct {
		name, shoot string
		ok          bool
	}{
		{ShootProjectResourceName("s", ShootProjectSuffixCACluster), "s", true},
		{ShootProjectResourceName("s", ShootProjectSuffixSSHKeypair), "s", true},
		{ShootProjectResourceName("s", ShootProjectSuffixSSHKeypairOld), "s", true},
		{ShootProjectResourceName("s", ShootProjectSuffixCAClient), "s", true},
		// The old keypair's name also ends in ".old", not in ".ssh-keypair": it must not read as shoot "s.ssh-keypair".
		{"s.ssh-keypair.old", "s", true},
		{".ca-cluster", "", false},
		{"ca-cluster", "", false},
		{"s.kubeconfig", "", false},
		{"s", "", false},
	} {
		shoot, ok := ShootOfProjectResource(tc.name)
		if shoot != tc.shoot || ok != tc.ok {
			t.Errorf("ShootOfProjectResource(%q) = %q, %v; want %q, %v", tc.name, shoot, ok, tc.shoot, tc.ok)
		}
	}
}

// A name the authorizer reads as published by a shoot is exactly the name that shoot publishes with one suffix.
func FuzzShootOfProjectResource(f *testing.F) {
	for _, s := range []string{"s.ca-cluster", "s.ssh-keypair.old", "a.b.ssh-keypair", ".ca-cluster", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		shoot, ok := ShootOfProjectResource(name)
		if !ok {
			if shoot != "" {
				t.Fatalf("%q: not published, but shoot %q", name, shoot)
			}
			return
		}
		if shoot == "" || !strings.HasPrefix(name, shoot+".") {
			t.Fatalf("%q: shoot %q", name, shoot)
		}
		for _, suffix := range shootProjectSuffixes {
			if ShootProjectResourceName(shoot, suffix) == name {
				return
			}
		}
		t.Fatalf("%q: shoot %q publishes no object of that name", name, shoot)
	})
}
