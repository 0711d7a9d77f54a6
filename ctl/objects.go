package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/jsonpath"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// ref is a kind and the names of its objects a command was given (none: the collection).
type ref struct {
	kind  *resource.Kind
	names []string
}

// parseRefs reads the resource arguments kubectl takes: TYPE [NAME...], TYPE1,TYPE2 (collections), or
// TYPE/NAME [TYPE/NAME...].
func (a *app) parseRefs(args []string) ([]ref, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("a resource type is required, e.g. shoots (see trellisctl api-resources)")
	}
	if strings.Contains(args[0], "/") {
		var refs []ref
		for _, arg := range args {
			typ, name, ok := strings.Cut(arg, "/")
			if !ok || name == "" {
				return nil, fmt.Errorf("%q: use TYPE/NAME for every argument, or TYPE NAME...", arg)
			}
			k, err := a.reg.Lookup(typ)
			if err != nil {
				return nil, err
			}
			if n := len(refs); n > 0 && refs[n-1].kind == k {
				refs[n-1].names = append(refs[n-1].names, name)
			} else {
				refs = append(refs, ref{kind: k, names: []string{name}})
			}
		}
		return refs, nil
	}
	types := strings.Split(args[0], ",")
	if len(types) > 1 && len(args) > 1 {
		return nil, fmt.Errorf("names go with one resource type, not %q", args[0])
	}
	var refs []ref
	for _, typ := range types {
		k, err := a.reg.Lookup(typ)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref{kind: k, names: args[1:]})
	}
	return refs, nil
}

// oneObject reads TYPE NAME or TYPE/NAME.
func (a *app) oneObject(args []string) (*resource.Kind, string, error) {
	refs, err := a.parseRefs(args)
	if err != nil {
		return nil, "", err
	}
	if len(refs) != 1 || len(refs[0].names) != 1 {
		return nil, "", fmt.Errorf("one object is required: TYPE NAME or TYPE/NAME")
	}
	return refs[0].kind, refs[0].names[0], nil
}

// scoped returns the client of kind k and the namespace a command on it works in (see namespace).
func (a *app) scoped(ctx context.Context, k *resource.Kind, all bool) (resource.Client, string, error) {
	ns, err := a.namespace(ctx, k, all)
	if err != nil {
		return nil, "", err
	}
	c, err := a.client(k)
	return c, ns, err
}

// namespace returns the namespace a command on kind k works in: "" for cluster-scoped kinds and with all; else -n,
// the namespace of -p's project, the context's namespace or project, or "default".
func (a *app) namespace(ctx context.Context, k *resource.Kind, all bool) (string, error) {
	if !k.Namespaced || all {
		return "", nil
	}
	return a.defaultNamespace(ctx)
}

func (a *app) defaultNamespace(ctx context.Context) (string, error) {
	if a.overrides.Namespace != "" && a.overrides.Project != "" {
		return "", fmt.Errorf("--namespace and --project exclude each other")
	}
	t, _, err := a.connect()
	if err != nil {
		return "", err
	}
	switch {
	case t.Namespace != "":
		return t.Namespace, nil
	case t.Project != "":
		return a.projectNamespace(ctx, t.Project)
	}
	return "default", nil
}

// projectNamespace returns a project's spec.namespace; when the project cannot be read (it does not exist, or the
// user may not read it) Gardener's default garden-<project>.
func (a *app) projectNamespace(ctx context.Context, project string) (string, error) {
	if ns, ok := a.projectNS[project]; ok {
		return ns, nil
	}
	fallback := "garden-" + project
	k, err := a.reg.Lookup("projects.core.gardener.cloud")
	if err != nil {
		return fallback, nil //nolint:nilerr // a CLI without projects has Gardener's default only
	}
	c, err := a.client(k)
	if err != nil {
		return "", err
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	obj, err := c.Get(cctx, &metav1.GetRequest{Name: project})
	ns := fallback
	switch {
	case err == nil:
		if v, verr := printer.Value(obj); verr == nil {
			if s := jsonpath.Format(jsonpath.MustParse(".spec.namespace").Eval(v)); s != "" {
				ns = s
			}
		}
	case hubconn.IsNotFound(err), hubconn.IsForbidden(err):
	default:
		return "", err
	}
	if a.projectNS == nil {
		a.projectNS = map[string]string{}
	}
	a.projectNS[project] = ns
	return ns, nil
}

// decode reads an object of kind k from JSON, strictly (unknown fields are errors naming their path).
func decode(k *resource.Kind, j []byte) (proto.Message, error) {
	obj := k.New()
	if err := kjson.Unmarshal(j, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// jsonObject decodes a JSON object keeping numbers as they are written.
func jsonObject(j []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

// metadataOf returns the metadata map of a decoded object, creating it.
func metadataOf(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

// list reads a whole collection, page by page.
func list(ctx context.Context, c resource.Client, req *metav1.ListRequest) ([]proto.Message, *metav1.ListMeta, error) {
	var all []proto.Message
	for {
		items, meta, err := c.List(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, items...)
		if meta.GetContinue() == "" {
			return all, meta, nil
		}
		req.Continue = meta.GetContinue()
	}
}
