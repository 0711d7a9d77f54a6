package config_test

import (
	"os"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/trellis-dev/trellis/agent/config"
)

// FuzzDecode feeds arbitrary files to the decoder: it must not panic, defaults and validation must not panic on
// whatever it accepts, and an accepted configuration must survive an encode/decode round trip.
func FuzzDecode(f *testing.F) {
	example, err := os.ReadFile("testdata/agent.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(minimal))
	f.Add([]byte(header + "hubClientConnection:\n  kubeconfigValidity:\n    validity: 1h\n"))
	f.Add([]byte(`{"apiVersion":"agent.trellis.dev/v1alpha1","kind":"AgentConfiguration","seedConfig":{"spec":{"networks":{"pods":"10.0.0.0/8"}}}}`))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Decode(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("encode an accepted configuration: %v", err)
		}
		again, err := config.Decode(out)
		if err != nil {
			t.Fatalf("decode the encoding of an accepted configuration: %v\n%s", err, out)
		}
		out2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(out2) {
			t.Fatalf("round trip changed the configuration:\n%s\n%s", out, out2)
		}
		c.Default()
		_ = c.Validate()
		_ = c.SeedName()
	})
}
