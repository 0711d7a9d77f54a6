package localmachine

import "testing"

// FuzzDecodeSpec feeds the machine API's request decoder (a PUT's body, with cloud-config user data inside) with
// arbitrary input: it must return a spec or an error, never panic.
func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(`{"userData":"I2Nsb3VkLWNvbmZpZwp3cml0ZV9maWxlczogW10K","labels":{"a":"b"}}`))
	f.Add([]byte(`{"userData":""}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, _ = decodeSpec(body)
	})
}

// FuzzBootstrapKubeconfig feeds the user data reader with arbitrary input.
func FuzzBootstrapKubeconfig(f *testing.F) {
	f.Add([]byte("#cloud-config\nwrite_files:\n- path: " + BootstrapKubeconfigPath + "\n  content: x\n"))
	f.Add([]byte("#cloud-config\nwrite_files:\n- path: " + BootstrapKubeconfigPath + "\n  encoding: b64\n  content: '!!'\n"))
	f.Fuzz(func(t *testing.T, userData []byte) {
		_, _ = bootstrapKubeconfig(userData)
	})
}
