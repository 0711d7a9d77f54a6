package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/hub/api"
)

const usage = `usage: trellisctl [--hub URL|HOST:PORT] [--ca FILE] [--token TOKEN] COMMAND
commands:
  apply -f FILE|DIR|-        create or update the objects of Gardener manifests (YAML or JSON)
  get RESOURCE [NAME] [-n NAMESPACE | -A] [-o json|yaml|name]
  delete RESOURCE NAME [-n NAMESPACE]
  api-resources              list the resources the hub serves
  seed bootstrap-token create SEED [--validity 1h]
                             create a bootstrap token for the agent of SEED and print it`

type client struct {
	hub, token string
	http       *http.Client
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trellisctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage) }
	hub := fs.String("hub", os.Getenv("TRELLIS_HUB"), "hub URL or host:port, e.g. https://127.0.0.1:8443 (env TRELLIS_HUB)")
	caFile := fs.String("ca", os.Getenv("TRELLIS_CA"), "CA certificate of the hub (env TRELLIS_CA)")
	token := fs.String("token", os.Getenv("TRELLIS_TOKEN"), "bearer token (env TRELLIS_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no command")
	}
	if *hub == "" {
		*hub = "https://127.0.0.1:8443"
	}
	// host:port (as the local landscape's env file has it) means https: the hub serves TLS only.
	if !strings.Contains(*hub, "://") {
		*hub = "https://" + *hub
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s holds no certificate", *caFile)
		}
		tlsCfg.RootCAs = pool
	}
	c := &client{hub: strings.TrimSuffix(*hub, "/"), token: *token, http: &http.Client{
		Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true},
	}}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "apply":
		return c.apply(rest, stdout, stderr)
	case "get":
		return c.get(rest, stdout, stderr)
	case "delete":
		return c.delete(rest, stdout, stderr)
	case "seed":
		return c.seed(rest, stdout, stderr)
	case "api-resources":
		for _, k := range api.Kinds {
			fmt.Fprintf(stdout, "%-28s %-40s %-26s namespaced=%v\n", k.Resource, k.APIVersion(), k.Kind, k.Namespaced)
		}
		return nil
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func path(k api.Kind, ns, name string) string {
	p := "/apis/" + k.Group + "/" + k.Version
	if k.Group == "" {
		p = "/api/" + k.Version
	}
	if k.Namespaced && ns != "" {
		p += "/namespaces/" + ns
	}
	p += "/" + k.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}

func (c *client) do(method, p string, body []byte, ct string) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.hub+p, r)
	if err != nil {
		return 0, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// statusError turns a Kubernetes Status body into an error.
func statusError(code int, body []byte) error {
	var st struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return fmt.Errorf("%s (%d %s)", st.Message, code, st.Reason)
	}
	return fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(string(body)))
}

func (c *client) apply(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files []string
	fs.Func("f", "file, directory or - (repeatable)", func(s string) error { files = append(files, s); return nil })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("apply needs -f")
	}
	docs, err := readManifests(files)
	if err != nil {
		return err
	}
	var failed int
	for _, d := range docs {
		if err := c.applyOne(d, stdout); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", d.source, err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects failed", failed, len(docs))
	}
	return nil
}

type document struct {
	source string
	json   []byte
}

func readManifests(files []string) ([]document, error) {
	var out []document
	for _, f := range files {
		var paths []string
		if f == "-" {
			paths = []string{"-"}
		} else if st, err := os.Stat(f); err != nil {
			return nil, err
		} else if st.IsDir() {
			for _, ext := range []string{"*.yaml", "*.yml", "*.json"} {
				m, _ := filepath.Glob(filepath.Join(f, ext))
				paths = append(paths, m...)
			}
			sort.Strings(paths)
		} else {
			paths = []string{f}
		}
		for _, p := range paths {
			var data []byte
			var err error
			if p == "-" {
				data, err = io.ReadAll(os.Stdin)
			} else {
				data, err = os.ReadFile(p)
			}
			if err != nil {
				return nil, err
			}
			for i, doc := range splitDocuments(data) {
				j, err := yaml.YAMLToJSON(doc)
				if err != nil {
					return nil, fmt.Errorf("%s: document %d: %w", p, i+1, err)
				}
				if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
					continue
				}
				out = append(out, document{source: fmt.Sprintf("%s#%d", p, i+1), json: j})
			}
		}
	}
	return out, nil
}

func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimRight(line, " \r") == "---" {
			docs = append(docs, []byte(strings.Join(cur, "\n")))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, []byte(strings.Join(cur, "\n")))
}

func (c *client) applyOne(d document, stdout io.Writer) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(d.json, &head); err != nil {
		return err
	}
	k, ok := api.KindFor(head.APIVersion, head.Kind)
	if !ok {
		return fmt.Errorf("%s %s is not served by the hub", head.APIVersion, head.Kind)
	}
	ns := head.Metadata.Namespace
	if k.Namespaced && ns == "" {
		ns = "default"
	}
	code, body, err := c.do(http.MethodPost, path(k, ns, ""), d.json, "application/json")
	if err != nil {
		return err
	}
	switch {
	case code == http.StatusCreated || code == http.StatusOK:
		fmt.Fprintf(stdout, "%s/%s created\n", strings.ToLower(k.Kind), head.Metadata.Name)
		return nil
	case code != http.StatusConflict:
		return statusError(code, body)
	}
	// It exists: a merge patch applies the manifest's fields over the stored object.
	code, body, err = c.do(http.MethodPatch, path(k, ns, head.Metadata.Name), d.json, "application/merge-patch+json")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return statusError(code, body)
	}
	fmt.Fprintf(stdout, "%s/%s configured\n", strings.ToLower(k.Kind), head.Metadata.Name)
	return nil
}

func kindByResource(r string) (api.Kind, error) {
	r = strings.ToLower(r)
	var match []api.Kind
	for _, k := range api.Kinds {
		if k.Resource == r || strings.ToLower(k.Kind) == r || strings.TrimSuffix(k.Resource, "s") == r {
			match = append(match, k)
		}
	}
	if len(match) == 0 {
		return api.Kind{}, fmt.Errorf("the hub serves no resource %q (see trellisctl api-resources)", r)
	}
	// Prefer Gardener's preferred version (v1beta1) when a resource has several.
	for _, k := range match {
		if k.StoredAs != "" {
			return k, nil
		}
	}
	return match[0], nil
}

func (c *client) get(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("n", "", "namespace")
	all := fs.Bool("A", false, "all namespaces")
	out := fs.String("o", "name", "json, yaml or name")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("get needs a resource")
	}
	k, err := kindByResource(pos[0])
	if err != nil {
		return err
	}
	namespace := *ns
	if k.Namespaced && namespace == "" && !*all {
		namespace = "default"
	}
	name := ""
	if len(pos) > 1 {
		name = pos[1]
	}
	code, body, err := c.do(http.MethodGet, path(k, namespace, name), nil, "")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return statusError(code, body)
	}
	switch *out {
	case "json":
		var buf bytes.Buffer
		_ = json.Indent(&buf, body, "", "  ")
		_, err = fmt.Fprintln(stdout, buf.String())
	case "yaml":
		y, yerr := yaml.JSONToYAML(body)
		if yerr != nil {
			return yerr
		}
		_, err = stdout.Write(y)
	default:
		var list struct {
			Items []struct {
				Metadata struct{ Name, Namespace string } `json:"metadata"`
			} `json:"items"`
			Metadata struct{ Name, Namespace string } `json:"metadata"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return err
		}
		if name != "" {
			fmt.Fprintf(stdout, "%s/%s\n", strings.ToLower(k.Kind), list.Metadata.Name)
			return nil
		}
		for _, it := range list.Items {
			if *all && k.Namespaced {
				fmt.Fprintf(stdout, "%s\t%s/%s\n", it.Metadata.Namespace, strings.ToLower(k.Kind), it.Metadata.Name)
			} else {
				fmt.Fprintf(stdout, "%s/%s\n", strings.ToLower(k.Kind), it.Metadata.Name)
			}
		}
	}
	return err
}

func (c *client) delete(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("n", "", "namespace")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("delete needs a resource and a name")
	}
	k, err := kindByResource(pos[0])
	if err != nil {
		return err
	}
	namespace := *ns
	if k.Namespaced && namespace == "" {
		namespace = "default"
	}
	code, body, err := c.do(http.MethodDelete, path(k, namespace, pos[1]), nil, "")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return statusError(code, body)
	}
	fmt.Fprintf(stdout, "%s/%s deleted\n", strings.ToLower(k.Kind), pos[1])
	return nil
}

// parseInterleaved parses flags that may come after positional arguments, as kubectl allows.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
