package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/manifest"
	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// files are the -f, -R and -o flags of the commands that read manifests.
type files struct {
	paths     []string
	recursive bool
	output    string
}

func (f *files) addFlags(cmd *cobra.Command, required bool) {
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.paths, "filename", "f", nil, "manifest file, directory or - for standard input (repeatable)")
	fl.BoolVarP(&f.recursive, "recursive", "R", false, "read directories recursively")
	fl.StringVarP(&f.output, "output", "o", "", "print the resulting objects as yaml, json or name instead of a message")
	if required {
		_ = cmd.MarkFlagRequired("filename")
	}
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
}

// serverFields are the metadata fields the hub manages: apply and create leave them out of what they send, so that
// the output of get -o yaml applies again without conflicts.
var serverFields = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "selfLink"}

func (a *app) createCmd() *cobra.Command {
	var f files
	cmd := &cobra.Command{
		Use:   "create -f FILE|DIR|-",
		Short: "Create the objects of Gardener manifests (YAML or JSON)",
		Example: `  trellisctl create -f shoot.yaml
  trellisctl create -f token.yaml -o yaml   # the response, e.g. an AccessToken's status.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.eachDocument(cmd.Context(), &f, "creating", a.createOne)
		},
	}
	f.addFlags(cmd, true)
	return cmd
}

func (a *app) applyCmd() *cobra.Command {
	var f files
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update the objects of Gardener manifests (YAML or JSON)",
		Long: `apply creates every object of the manifests that does not exist and merges the manifest into every one that
does (a JSON merge patch: fields it names are set, fields it leaves out are kept, null removes a field). It
reports each as created, configured or unchanged. Server-managed metadata (resourceVersion, uid,
creationTimestamp, generation, ...) and status are ignored, so the output of 'get -o yaml' applies again unchanged.
Files may hold several documents separated by '---' and Lists; directories are read in file-name order.`,
		Example: `  trellisctl apply -f ../shared/gardener/examples/05-project-dev.yaml
  trellisctl apply -f manifests/ -R
  trellisctl get shoot local -p local -o yaml | trellisctl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.eachDocument(cmd.Context(), &f, "applying", a.applyOne)
		},
	}
	f.addFlags(cmd, true)
	return cmd
}

// eachDocument runs fn on every document of the files, reporting each failure and going on with the next.
func (a *app) eachDocument(ctx context.Context, f *files, verb string, fn func(context.Context, *resource.Kind, manifest.Document, []byte, string) (proto.Message, string, error)) error {
	docs, err := manifest.Read(f.paths, f.recursive, a.opts.In)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return fmt.Errorf("no objects in %v", f.paths)
	}
	var out []proto.Message
	var outKind *resource.Kind
	failed := 0
	for _, d := range docs {
		k, body, ns, err := a.prepare(ctx, d)
		var obj proto.Message
		var result string
		if err == nil {
			obj, result, err = fn(ctx, k, d, body, ns)
		}
		if err != nil {
			reportDocument(a.opts.Err, verb, d.Source, err)
			failed++
			continue
		}
		if f.output == "" {
			fmt.Fprintf(a.opts.Out, "%s %s\n", printer.Name(k, obj), result)
			continue
		}
		if outKind != nil && outKind != k {
			if err := a.printObjects(outKind, f.output, out); err != nil {
				return err
			}
			out = nil
		}
		outKind, out = k, append(out, obj)
	}
	if len(out) > 0 {
		if err := a.printObjects(outKind, f.output, out); err != nil {
			return err
		}
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

func (a *app) printObjects(k *resource.Kind, format string, objs []proto.Message) error {
	p, err := printer.New(a.opts.Out, k, printer.Options{Format: format, Now: a.opts.Now})
	if err != nil {
		return err
	}
	return p.Print(objs, len(objs) == 1)
}

// reportDocument prints a document's error, naming the document, as kubectl does.
func reportDocument(w interface{ Write([]byte) (int, error) }, verb, source string, err error) {
	var se *hubconn.StatusError
	if errors.As(err, &se) {
		fmt.Fprintf(w, "Error from server (%s): error when %s %q: %s\n", se.Reason(), verb, source, se.Error())
		return
	}
	fmt.Fprintf(w, "error: %s %q: %v\n", verb, source, err)
}

// prepare finds a document's kind and namespace and returns the JSON to send: the document in its namespace,
// without server-managed metadata and status.
func (a *app) prepare(ctx context.Context, d manifest.Document) (*resource.Kind, []byte, string, error) {
	k, ok := a.reg.ForObject(d.APIVersion, d.Kind)
	if !ok {
		return nil, nil, "", fmt.Errorf("%s %s is not served by the hub (see trellisctl api-resources)", d.APIVersion, d.Kind)
	}
	obj, err := jsonObject(d.JSON)
	if err != nil {
		return nil, nil, "", err
	}
	md := metadataOf(obj)
	for _, f := range serverFields {
		delete(md, f)
	}
	delete(obj, "status")
	ns := ""
	if k.Namespaced {
		switch {
		case d.Namespace == "":
			if ns, err = a.defaultNamespace(ctx); err != nil {
				return nil, nil, "", err
			}
		case a.overrides.Namespace != "" && a.overrides.Namespace != d.Namespace:
			return nil, nil, "", fmt.Errorf("the object's namespace %q does not match --namespace %q", d.Namespace, a.overrides.Namespace)
		default:
			ns = d.Namespace
		}
		md["namespace"] = ns
	} else {
		delete(md, "namespace") // as kubectl ignores it for cluster-scoped kinds
	}
	body, err := json.Marshal(obj) // numbers were read as json.Number and are written as read
	return k, body, ns, err
}

func (a *app) createOne(ctx context.Context, k *resource.Kind, _ manifest.Document, body []byte, _ string) (proto.Message, string, error) {
	created, err := a.create(ctx, k, body)
	return created, "created", err
}

// create decodes an object of kind k from JSON and creates it.
func (a *app) create(ctx context.Context, k *resource.Kind, body []byte) (proto.Message, error) {
	obj, err := decode(k, body)
	if err != nil {
		return nil, err
	}
	c, err := a.client(k)
	if err != nil {
		return nil, err
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	return c.Create(cctx, obj)
}

// applyOne creates the object, or merges the document into it. The merge is computed here first: when it would
// change nothing the object is reported unchanged without a write. Otherwise the document is sent as a merge patch,
// and the result compared with the object before at the fields the document names: the hub may normalize what the
// document says (a version "1.35" completed to "1.35.2", a project's owner added to its members again), and
// controllers may change other fields meanwhile; neither is a change the apply made.
func (a *app) applyOne(ctx context.Context, k *resource.Kind, d manifest.Document, body []byte, ns string) (proto.Message, string, error) {
	if d.Name == "" {
		return nil, "", fmt.Errorf("apply needs metadata.name (create takes generateName)")
	}
	if _, err := decode(k, body); err != nil {
		return nil, "", err
	}
	c, err := a.client(k)
	if err != nil {
		return nil, "", err
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	cur, err := c.Get(cctx, &metav1.GetRequest{Namespace: ns, Name: d.Name})
	if hubconn.IsNotFound(err) {
		return a.createOne(ctx, k, d, body, ns)
	}
	if err != nil {
		return nil, "", err
	}
	want, err := merge(k, cur, body)
	if err != nil {
		return nil, "", err
	}
	if proto.Equal(want, cur) {
		return cur, "unchanged", nil
	}
	patched, err := c.Patch(cctx, &metav1.PatchRequest{Namespace: ns, Name: d.Name, Patch: &metav1.RawExtension{Raw: body}, PatchType: mergePatch})
	if err != nil {
		return nil, "", err
	}
	same, err := sameAt(body, cur, patched)
	if err != nil || !same {
		return patched, "configured", err
	}
	return patched, "unchanged", nil
}

const (
	mergePatch = "application/merge-patch+json"
	jsonPatch  = "application/json-patch+json"
)

// sameAt reports whether two states of an object agree at the fields a document names (all of a map the document
// names, fields of objects it names by their own).
func sameAt(doc []byte, x, y proto.Message) (bool, error) {
	shape, err := printer.DecodeJSON(doc)
	if err != nil {
		return false, err
	}
	xv, err := printer.Value(x)
	if err != nil {
		return false, err
	}
	yv, err := printer.Value(y)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(project(shape, xv), project(shape, yv)), nil
}

// project returns the parts of v at the keys of shape, recursively through objects; other values whole.
func project(shape, v any) any {
	sm, ok := shape.(map[string]any)
	vm, isMap := v.(map[string]any)
	if !ok || !isMap {
		return v
	}
	out := map[string]any{}
	for k, s := range sm {
		if x, ok := vm[k]; ok {
			out[k] = project(s, x)
		}
	}
	return out
}
