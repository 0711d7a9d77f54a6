package componentconfig

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Load reads and decodes the file at path (Decode); an empty path gives the defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		c := &Config{}
		c.Default()
		return c, nil
	}
	data, err := os.ReadFile(path) //nolint:gosec // G304: the operator's --config file
	if err != nil {
		return nil, err
	}
	c, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Decode decodes a YAML (or JSON) stream of at most one ControllerManagerConfiguration and one
// SchedulerConfiguration, strictly, then defaults and validates them.
func Decode(data []byte) (*Config, error) {
	c := &Config{}
	seen := map[string]bool{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue
		}
		var head struct{ APIVersion, Kind string }
		if err := json.Unmarshal(j, &head); err != nil {
			return nil, fmt.Errorf("document %d: not an object: %w", i, err)
		}
		id := head.APIVersion + ", Kind=" + head.Kind
		if seen[id] {
			return nil, fmt.Errorf("document %d: a second %s", i, id)
		}
		seen[id] = true
		var target any
		switch {
		case head.APIVersion == ControllerManagerAPIVersion && head.Kind == ControllerManagerKind:
			target = &c.ControllerManager
		case head.APIVersion == SchedulerAPIVersion && head.Kind == SchedulerKind:
			target = &c.Scheduler
		default:
			return nil, fmt.Errorf("document %d: %s is not supported (want %s, Kind=%s or %s, Kind=%s)", i, id,
				ControllerManagerAPIVersion, ControllerManagerKind, SchedulerAPIVersion, SchedulerKind)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(target); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
