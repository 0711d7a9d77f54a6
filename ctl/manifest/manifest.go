package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Document is one object of a manifest.
type Document struct {
	// Source says where it was read from: file#document, with .items[i] for an item of a List.
	Source string
	// JSON is the object.
	JSON []byte
	// APIVersion, Kind, Name and Namespace are read from the object.
	APIVersion, Kind, Name, Namespace string
}

// maxFile bounds what is read from one file or standard input.
const maxFile = 64 << 20

var extensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// Read reads the objects of files, directories and "-" (stdin), in order; the files of a directory sorted by name.
func Read(paths []string, recursive bool, stdin io.Reader) ([]Document, error) {
	var out []Document
	for _, p := range paths {
		files, err := expand(p, recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := readFile(f, stdin)
			if err != nil {
				return nil, err
			}
			docs, err := Parse(f, data)
			if err != nil {
				return nil, err
			}
			out = append(out, docs...)
		}
	}
	return out, nil
}

func expand(p string, recursive bool) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != p && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if extensions[strings.ToLower(filepath.Ext(path))] {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s: no .yaml, .yml or .json files", p)
	}
	return files, err
}

func readFile(p string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if p != "-" {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxFile)
	}
	return data, nil
}

// Parse reads the objects of one file's content; source names it in errors and in each Document.
func Parse(source string, data []byte) ([]Document, error) {
	var out []Document
	for i, doc := range split(data) {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue
		}
		docs, err := objects(fmt.Sprintf("%s#%d", source, i+1), j, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

type head struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// objects returns the object j, or the items of a List; depth bounds Lists in Lists.
func objects(source string, j []byte, depth int) ([]Document, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(j), []byte("{")) {
		return nil, fmt.Errorf("%s: not an object", source)
	}
	var h head
	if err := json.Unmarshal(j, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if h.APIVersion == "" || h.Kind == "" {
		return nil, fmt.Errorf("%s: apiVersion and kind are required", source)
	}
	if h.Kind == "List" || strings.HasSuffix(h.Kind, "List") && h.Items != nil {
		if depth > 0 {
			return nil, fmt.Errorf("%s: a List in a List", source)
		}
		var out []Document
		for i, it := range h.Items {
			docs, err := objects(fmt.Sprintf("%s.items[%d]", source, i), it, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, docs...)
		}
		return out, nil
	}
	return []Document{{Source: source, JSON: j, APIVersion: h.APIVersion, Kind: h.Kind, Name: h.Metadata.Name, Namespace: h.Metadata.Namespace}}, nil
}

// split cuts a YAML stream into documents at "---" lines ("--- " and "---#..." too); a JSON file is one document.
func split(data []byte) [][]byte {
	var docs [][]byte
	start := 0
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off
		}
		if isSeparator(data[off:end]) {
			docs = append(docs, data[start:off])
			start = min(end+1, len(data))
		}
		off = end + 1
	}
	return append(docs, data[start:])
}

func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("---"))
	if !ok {
		return false
	}
	rest = bytes.TrimLeft(rest, " \t")
	return len(rest) == 0 || rest[0] == '#'
}
