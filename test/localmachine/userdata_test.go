package localmachine

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestDecodeSpec(t *testing.T) {
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: shoot\n  cluster: {server: 'https://10.225.0.5'}\n"
	userData := func(file string) string {
		return base64.StdEncoding.EncodeToString([]byte(file))
	}
	good := "#cloud-config\nwrite_files:\n- path: " + BootstrapKubeconfigPath + "\n  encoding: b64\n  content: " +
		base64.StdEncoding.EncodeToString([]byte(kc)) + "\n"
	for name, tc := range map[string]struct {
		body, wantErr string
	}{
		"valid":           {body: `{"userData":"` + userData(good) + `","labels":{"worker.gardener.cloud/pool":"a"}}`},
		"unknown field":   {body: `{"userData":"` + userData(good) + `","color":"red"}`, wantErr: `unknown field "color"`},
		"not cloudconfig": {body: `{"userData":"` + userData("#!/bin/sh\n") + `"}`, wantErr: "userData: not cloud-config"},
		"no kubeconfig":   {body: `{"userData":"` + userData("#cloud-config\nwrite_files: []\n") + `"}`, wantErr: "no file " + BootstrapKubeconfigPath},
		"bad label":       {body: `{"userData":"` + userData(good) + `","labels":{"a b":"c"}}`, wantErr: `labels: key "a b"`},
		"bad encoding": {body: `{"userData":"` + userData("#cloud-config\nwrite_files:\n- {path: "+BootstrapKubeconfigPath+", encoding: gzip, content: x}\n") + `"}`,
			wantErr: `encoding "gzip"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, got, err := decodeSpec([]byte(tc.body))
			if tc.wantErr == "" {
				if err != nil || string(got.kubeconfig) != kc {
					t.Fatalf("decodeSpec: %q, %v; want the kubeconfig", got.kubeconfig, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("decodeSpec: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestClusterDNS: the machine's kubelet takes clusterDNS and clusterDomain from the kubelet configuration of the user
// data (the shoot's CoreDNS Service); without one, the machine's defaults stay.
func TestClusterDNS(t *testing.T) {
	withConfig := func(cfg string) []byte {
		return []byte("#cloud-config\nwrite_files:\n- path: " + KubeletConfigPath + "\n  encoding: b64\n  content: " +
			base64.StdEncoding.EncodeToString([]byte(cfg)) + "\n")
	}
	for name, tc := range map[string]struct {
		userData                     []byte
		wantDNS, wantDomain, wantErr string
	}{
		"shoot's":      {userData: withConfig("kind: KubeletConfiguration\nclusterDNS: [100.64.0.10]\nclusterDomain: cluster.local\n"), wantDNS: "100.64.0.10", wantDomain: "cluster.local"},
		"no config":    {userData: []byte("#cloud-config\nwrite_files: []\n")},
		"no dns":       {userData: withConfig("kind: KubeletConfiguration\n")},
		"not an IP":    {userData: withConfig("clusterDNS: [kube-dns]\n"), wantErr: "no IP address"},
		"not a config": {userData: withConfig("clusterDNS: {a: b}\n"), wantErr: KubeletConfigPath},
	} {
		t.Run(name, func(t *testing.T) {
			dns, domain, err := clusterDNS(tc.userData)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("clusterDNS: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || dns != tc.wantDNS || domain != tc.wantDomain {
				t.Fatalf("clusterDNS: %q %q %v, want %q %q", dns, domain, err, tc.wantDNS, tc.wantDomain)
			}
		})
	}
}
