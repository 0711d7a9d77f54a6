package openapi

import (
	"fmt"
	"sort"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/trellis-dev/trellis/hub/api"
)

// Title is the title of every document.
const Title = "Trellis hub"

// statusMessage is the message of every error body: Kubernetes' Status.
const statusMessage = "trellis.meta.v1.Status"

// Documents are the hub's OpenAPI documents.
type Documents struct {
	// V2 describes every kind.
	V2 *spec.Swagger
	// V3 holds one document per API group and version, keyed as kube-apiserver keys them under /openapi/v3:
	// "api/v1", "apis/core.gardener.cloud/v1beta1", ...
	V3 map[string]*spec3.OpenAPI
}

// Build builds the documents of kinds from the descriptors in files, which must hold every kind's service (the
// <Kind>Service proto/kindgen generates). Descriptions come from the protos' comments when files carry source
// information (`buf build` keeps it), and are empty otherwise.
func Build(files *protoregistry.Files, kinds []api.Kind) (*Documents, error) {
	services, err := findServices(files, kinds)
	if err != nil {
		return nil, err
	}
	v2, err := swagger(files, kinds, services)
	if err != nil {
		return nil, err
	}
	docs := &Documents{V2: v2, V3: map[string]*spec3.OpenAPI{}}
	byGV := map[string][]api.Kind{}
	for _, k := range kinds {
		byGV[groupVersionKey(k)] = append(byGV[groupVersionKey(k)], k)
	}
	for key, ks := range byGV {
		one, err := swagger(files, ks, services)
		if err != nil {
			return nil, err
		}
		docs.V3[key] = openapiconv.ConvertV2ToV3(one)
	}
	return docs, nil
}

// groupVersionKey names a kind's group and version as /openapi/v3 does.
func groupVersionKey(k api.Kind) string {
	if k.Group == "" {
		return "api/" + k.Version
	}
	return "apis/" + k.Group + "/" + k.Version
}

// service holds the messages of one kind's service.
type service struct {
	object, list, event protoreflect.MessageDescriptor
}

// findServices finds each kind's <Kind>Service: the one whose Get is routed to the kind's object path.
func findServices(files *protoregistry.Files, kinds []api.Kind) (map[string]service, error) {
	byPath := map[string]protoreflect.ServiceDescriptor{}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := range svcs.Len() {
			sd := svcs.Get(i)
			get := sd.Methods().ByName("Get")
			if get == nil {
				continue
			}
			rule, _ := proto.GetExtension(get.Options(), annotations.E_Http).(*annotations.HttpRule)
			if p := rule.GetGet(); p != "" {
				byPath[p] = sd
			}
		}
		return true
	})
	out := map[string]service{}
	for _, k := range kinds {
		p := objectPath(k)
		sd, ok := byPath[p]
		if !ok {
			return nil, fmt.Errorf("no service routes GET %s (kind %s %s)", p, k.APIVersion(), k.Kind)
		}
		m := sd.Methods()
		s := service{object: m.ByName("Get").Output()}
		if l := m.ByName("List"); l != nil {
			s.list = l.Output()
		}
		if w := m.ByName("Watch"); w != nil {
			s.event = w.Output()
		}
		if s.list == nil || s.event == nil {
			return nil, fmt.Errorf("service %s lacks List or Watch", sd.FullName())
		}
		out[groupVersionKey(k)+"/"+k.Kind] = s
	}
	return out, nil
}

// swagger builds the v2 document of kinds.
func swagger(files *protoregistry.Files, kinds []api.Kind, services map[string]service) (*spec.Swagger, error) {
	s := newSchemas()
	doc := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:  "2.0",
		Info:     &spec.Info{InfoProps: spec.InfoProps{Title: Title, Version: "unversioned"}},
		Consumes: []string{"application/json", "application/yaml"},
		Produces: []string{"application/json", "application/yaml"},
		Paths:    &spec.Paths{Paths: map[string]spec.PathItem{}},
		SecurityDefinitions: spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header",
			Description: "Bearer token authentication: 'Bearer <token>'. Seed agents authenticate with client certificates instead.",
		}}},
		Security: []map[string][]string{{"BearerToken": {}}},
	}}
	st, err := files.FindDescriptorByName(statusMessage)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", statusMessage, err)
	}
	status := s.message(st.(protoreflect.MessageDescriptor))
	for _, k := range kinds {
		svc := services[groupVersionKey(k)+"/"+k.Kind]
		obj := s.message(svc.object)
		setGVK(s.defs, svc.object, k.Group, k.Version, k.Kind)
		list := s.message(svc.list)
		setGVK(s.defs, svc.list, k.Group, k.Version, k.Kind+"List")
		event := s.message(svc.event)
		for p, item := range pathItems(k, obj, list, event, status) {
			if _, dup := doc.Paths.Paths[p]; dup {
				return nil, fmt.Errorf("path %s is served twice", p)
			}
			doc.Paths.Paths[p] = item
		}
	}
	doc.Definitions = s.defs
	return doc, nil
}

// setGVK marks a kind's definition with x-kubernetes-group-version-kind, as kube-apiserver's documents do; clients
// such as kubectl map kinds to schemas with it.
func setGVK(defs spec.Definitions, md protoreflect.MessageDescriptor, group, version, kind string) {
	name := string(md.FullName())
	d := defs[name]
	gvks, _ := d.Extensions["x-kubernetes-group-version-kind"].([]any)
	gvks = append(gvks, map[string]any{"group": group, "version": version, "kind": kind})
	sort.Slice(gvks, func(i, j int) bool { return fmt.Sprint(gvks[i]) < fmt.Sprint(gvks[j]) })
	d.AddExtension("x-kubernetes-group-version-kind", gvks)
	defs[name] = d
}
