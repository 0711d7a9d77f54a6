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
				if err != nil || string(got) != kc {
					t.Fatalf("decodeSpec: %q, %v; want the kubeconfig", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("decodeSpec: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
