package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// FilesFromImage reads a binary FileDescriptorSet (a `buf build` image, which keeps source information and imports)
// into a registry of its files.
func FilesFromImage(data []byte) (*protoregistry.Files, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("read image: %w", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("read image: %w", err)
	}
	return files, nil
}

// The names of the documents in their directory.
const (
	v2File = "swagger.json"
	v3Dir  = "v3"
)

// v3File names the file of a group-version key ("apis/core.gardener.cloud/v1beta1") as kube-apiserver's
// api/openapi-spec/v3 does: apis__core.gardener.cloud__v1beta1_openapi.json.
func v3File(key string) string { return strings.ReplaceAll(key, "/", "__") + "_openapi.json" }

// v3Key is the inverse of v3File.
func v3Key(file string) (string, bool) {
	base, ok := strings.CutSuffix(file, "_openapi.json")
	return strings.ReplaceAll(base, "__", "/"), ok
}

// Write writes docs into dir (swagger.json and v3/*_openapi.json), replacing v3 documents of groups that are gone.
func Write(docs *Documents, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, v3Dir), 0o755); err != nil { //nolint:gosec // G301: docs/openapi is part of the source tree, readable like it
		return err
	}
	if err := writeJSON(filepath.Join(dir, v2File), docs.V2); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, v3Dir, "*_openapi.json"))
	for _, f := range old {
		if key, _ := v3Key(filepath.Base(f)); docs.V3[key] == nil {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for key, doc := range docs.V3 {
		if err := writeJSON(filepath.Join(dir, v3Dir, v3File(key)), doc); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	return os.WriteFile(path, b.Bytes(), 0o644) //nolint:gosec // G306: docs/openapi is part of the source tree, readable like it
}

// Read reads the documents Write wrote into fsys.
func Read(fsys fs.FS) (*Documents, error) {
	docs := &Documents{V3: map[string]*spec3.OpenAPI{}}
	var err error
	if docs.V2, err = readV2(fsys); err != nil {
		return nil, err
	}
	keys, err := v3Keys(fsys)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if docs.V3[key], err = readV3(fsys, key); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

func readV2(fsys fs.FS) (*spec.Swagger, error) {
	raw, err := fs.ReadFile(fsys, v2File)
	if err != nil {
		return nil, err
	}
	doc := &spec.Swagger{}
	if err := json.Unmarshal(raw, doc); err != nil {
		return nil, fmt.Errorf("read %s: %w", v2File, err)
	}
	return doc, nil
}

// v3Keys lists the group-version keys of the v3 documents in fsys, sorted.
func v3Keys(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, v3Dir+"/*_openapi.json")
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(names))
	for _, name := range names {
		key, _ := v3Key(path.Base(name))
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys, nil
}

func readV3(fsys fs.FS, key string) (*spec3.OpenAPI, error) {
	name := v3Dir + "/" + v3File(key)
	raw, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(raw, doc); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return doc, nil
}
