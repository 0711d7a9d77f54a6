package localmachine

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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

// TestKubeletConfig: the machine's kubelet takes clusterDNS, clusterDomain and registerWithTaints from the kubelet
// configuration of the user data (the shoot's CoreDNS Service, Gardener's critical-components taint); without one,
// the machine's defaults stay. A taint the kubelet would refuse is an error naming it.
func TestKubeletConfig(t *testing.T) {
	withConfig := func(cfg string) []byte {
		return []byte("#cloud-config\nwrite_files:\n- path: " + KubeletConfigPath + "\n  encoding: b64\n  content: " +
			base64.StdEncoding.EncodeToString([]byte(cfg)) + "\n")
	}
	taint := corev1.Taint{Key: "node.gardener.cloud/critical-components-not-ready", Effect: corev1.TaintEffectNoSchedule}
	for name, tc := range map[string]struct {
		userData                     []byte
		wantDNS, wantDomain, wantErr string
		wantTaints                   []corev1.Taint
	}{
		"shoot's": {userData: withConfig("kind: KubeletConfiguration\nclusterDNS: [100.64.0.10]\nclusterDomain: cluster.local\n" +
			"registerWithTaints:\n- {key: node.gardener.cloud/critical-components-not-ready, effect: NoSchedule}\n"),
			wantDNS: "100.64.0.10", wantDomain: "cluster.local", wantTaints: []corev1.Taint{taint}},
		"no config":    {userData: []byte("#cloud-config\nwrite_files: []\n")},
		"no dns":       {userData: withConfig("kind: KubeletConfiguration\n")},
		"not an IP":    {userData: withConfig("clusterDNS: [kube-dns]\n"), wantErr: "no IP address"},
		"not a config": {userData: withConfig("clusterDNS: {a: b}\n"), wantErr: KubeletConfigPath},
		"bad effect": {userData: withConfig("registerWithTaints: [{key: a, effect: Never}]\n"),
			wantErr: `registerWithTaints[0].effect "Never"`},
		"bad key": {userData: withConfig("registerWithTaints: [{key: 'a b', effect: NoSchedule}]\n"),
			wantErr: `registerWithTaints[0].key "a b"`},
	} {
		t.Run(name, func(t *testing.T) {
			dns, domain, taints, err := kubeletConfig(tc.userData)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("kubeletConfig: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || dns != tc.wantDNS || domain != tc.wantDomain || !slices.Equal(taints, tc.wantTaints) {
				t.Fatalf("kubeletConfig: %q %q %v %v, want %q %q %v", dns, domain, taints, err, tc.wantDNS, tc.wantDomain, tc.wantTaints)
			}
		})
	}
}
