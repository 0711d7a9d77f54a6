package review

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sort"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
)

// The review endpoints, as kube-apiserver serves them (POST only; the reviews are not stored).
const (
	AccessReviewPath = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	RulesReviewPath  = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
	WhoAmIPath       = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
)

// Endpoints are the reviews' discovery entries.
var Endpoints = []api.Endpoint{
	{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview", Verbs: []string{"create"}},
	{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews", Kind: "SelfSubjectRulesReview", Verbs: []string{"create"}},
	{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews", Kind: "SelfSubjectReview", Verbs: []string{"create"}},
}

// maxBody bounds a review's request body; a review is a few hundred bytes.
const maxBody = 64 << 10

// Config configures the reviews' handler.
type Config struct {
	// Authorizer answers the reviews (the kinds' registry's, api.Registry.Authorizer); nil allows everything.
	Authorizer api.Authorizer
	// Reader reads the object a review names (the kinds' registry), which the authorizer decides a get, update,
	// patch or delete of by (api.Attributes.Current); nil reads nothing.
	Reader interface {
		Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error)
	}
	// Authenticate returns the request's context with its user (auth.WithUser), or the error to answer with.
	Authenticate func(*http.Request) (context.Context, error)
	// WriteError writes an error as a Kubernetes Status.
	WriteError func(http.ResponseWriter, error)
	// PathAllowed decides a non-resource request (a path and a verb), as the hub's HTTP handlers do.
	PathAllowed func(u auth.User, verb, path string) error
	Log         *slog.Logger
}

// Handler serves AccessReviewPath, RulesReviewPath and WhoAmIPath.
func Handler(cfg Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			cfg.WriteError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: r.URL.Path}, r.Method))
			return
		}
		ctx, err := cfg.Authenticate(r)
		if err != nil {
			cfg.WriteError(w, err)
			return
		}
		u, _ := auth.UserFrom(ctx)
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			cfg.WriteError(w, apierrors.NewBadRequest(fmt.Sprintf("reading the request body: %v", err)))
			return
		}
		var out runtime.Object
		var gv schema.GroupVersion
		ct := r.Header.Get("Content-Type")
		switch r.URL.Path {
		case AccessReviewPath:
			gv = authzv1.SchemeGroupVersion
			out, err = cfg.accessReview(ctx, u, ct, body)
		case RulesReviewPath:
			gv = authzv1.SchemeGroupVersion
			out, err = cfg.rulesReview(ctx, u, ct, body)
		case WhoAmIPath:
			gv = authnv1.SchemeGroupVersion
			out, err = whoAmI(u, ct, body)
		default:
			err = apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path)
		}
		if err != nil {
			cfg.WriteError(w, err)
			return
		}
		enc, mediaType := encoderFor(r.Header.Get("Accept"))
		w.Header().Set("Content-Type", mediaType)
		w.WriteHeader(http.StatusCreated)
		if err := codecs.WithoutConversion().EncoderForVersion(enc, gv).Encode(out, w); err != nil && cfg.Log != nil {
			cfg.Log.Debug("writing a review", "path", r.URL.Path, "err", err)
		}
	})
}

// scheme holds the review kinds; codecs are Kubernetes' serializers of them (JSON, YAML and protobuf), the ones
// kube-apiserver serves them with: kubectl sends reviews as protobuf.
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	utilruntime.Must(authzv1.AddToScheme(scheme))
	utilruntime.Must(authnv1.AddToScheme(scheme))
}

// decode reads a review of the request's Content-Type (JSON when it has none) into into, a review kind of gv.
func decode(contentType string, body []byte, gv schema.GroupVersion, into runtime.Object) error {
	kind := fmt.Sprintf("%T", into)[strings.LastIndex(fmt.Sprintf("%T", into), ".")+1:]
	mediaType := "application/json"
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return gateway.UnsupportedMediaType(mediaTypes())
		}
		mediaType = mt
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return gateway.UnsupportedMediaType(mediaTypes())
	}
	want := gv.WithKind(kind)
	_, gvk, err := info.Serializer.Decode(body, &want, into)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("decoding the %s: %v", kind, err))
	}
	if gvk != nil && *gvk != want {
		return apierrors.NewBadRequest(fmt.Sprintf("apiVersion/kind: %s is not %s", gvk, want))
	}
	return nil
}

// mediaTypes are the types reviews are read in.
func mediaTypes() []string {
	var out []string
	for _, info := range codecs.SupportedMediaTypes() {
		out = append(out, info.MediaType)
	}
	return out
}

// encoderFor returns the serializer of the first media type of an Accept header that the reviews are served as
// (JSON when it names none: kube-apiserver answers 406 then, but every client accepts JSON).
func encoderFor(accept string) (runtime.Serializer, string) {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || len(params) > 0 && params["as"] != "" {
			continue
		}
		if info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt); ok {
			return info.Serializer, info.MediaType
		}
	}
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	return info.Serializer, info.MediaType
}

func (cfg Config) accessReview(ctx context.Context, u auth.User, contentType string, body []byte) (*authzv1.SelfSubjectAccessReview, error) {
	var rev authzv1.SelfSubjectAccessReview
	if err := decode(contentType, body, authzv1.SchemeGroupVersion, &rev); err != nil {
		return nil, err
	}
	ra, nra := rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes
	switch {
	case ra == nil && nra == nil:
		return nil, invalid("SelfSubjectAccessReview", "spec.resourceAttributes", "exactly one of resourceAttributes and nonResourceAttributes must be set")
	case ra != nil && nra != nil:
		return nil, invalid("SelfSubjectAccessReview", "spec.nonResourceAttributes", "exactly one of resourceAttributes and nonResourceAttributes must be set")
	}
	var err error
	if ra != nil {
		gr := schema.GroupResource{Group: ra.Group, Resource: ra.Resource}
		ns := ra.Namespace
		if clusterScoped(gr) {
			// The request the review describes has no namespace (kubectl sends its context's namespace anyway).
			ns = ""
		}
		a := api.Attributes{User: u, Verb: ra.Verb, Resource: gr, Subresource: ra.Subresource, Namespace: ns, Name: ra.Name}
		if a.Name != "" && a.Verb != api.VerbCreate && cfg.Reader != nil {
			// As the kinds' servers ask: with the stored object, nil when there is none.
			if cur, err := cfg.Reader.Get(ctx, gr, ns, a.Name); err == nil {
				a.Current = cur
			}
		}
		err = cfg.authorize(ctx, a)
	} else if cfg.PathAllowed != nil {
		err = cfg.PathAllowed(u, nra.Verb, nra.Path)
	}
	rev.TypeMeta = kmetav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"}
	rev.Status = authzv1.SubjectAccessReviewStatus{Allowed: err == nil}
	if err != nil {
		if !apierrors.IsForbidden(err) {
			// A failure to decide (the watch cache not synced, say) is the review's error, not a denial.
			rev.Status.EvaluationError = err.Error()
		} else {
			rev.Status.Reason = reasonOf(err)
		}
	}
	return &rev, nil
}

// clusterScoped reports whether gr is a cluster-scoped kind the hub serves.
func clusterScoped(gr schema.GroupResource) bool {
	for _, k := range api.Kinds {
		if k.GroupResource() == gr {
			return !k.Namespaced
		}
	}
	return false
}

func (cfg Config) authorize(ctx context.Context, a api.Attributes) error {
	if cfg.Authorizer == nil {
		return nil
	}
	return cfg.Authorizer.Authorize(ctx, a)
}

// reasonOf is the message of a Forbidden error without kube-apiserver's prefix.
func reasonOf(err error) string {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se.ErrStatus.Message
	}
	return err.Error()
}

// ruleVerbs are the verbs a rules review asks about for every resource.
var ruleVerbs = []string{api.VerbGet, api.VerbList, api.VerbWatch, api.VerbCreate, api.VerbUpdate, api.VerbPatch, api.VerbDelete}

// rulesReview answers which verbs the user may use on which resources in a namespace: the authorizer is asked
// about every served resource and verb (without a name, as a list is), and the resources of a group allowed the same
// verbs are one rule. A seed's decisions depend on the objects (what belongs to its seed), which a rule cannot say,
// so its rules are those allowed without an object and marked incomplete.
func (cfg Config) rulesReview(ctx context.Context, u auth.User, contentType string, body []byte) (*authzv1.SelfSubjectRulesReview, error) {
	var rev authzv1.SelfSubjectRulesReview
	if err := decode(contentType, body, authzv1.SchemeGroupVersion, &rev); err != nil {
		return nil, err
	}
	ns := rev.Spec.Namespace
	type key struct{ group, verbs string }
	byKey := map[key][]string{}
	var keys []key
	for _, k := range api.Kinds {
		rns := ns
		if !k.Namespaced {
			rns = ""
		}
		var verbs []string
		for _, v := range ruleVerbs {
			err := cfg.authorize(ctx, api.Attributes{User: u, Verb: v, Resource: k.GroupResource(), Namespace: rns})
			if err == nil {
				verbs = append(verbs, v)
			} else if !apierrors.IsForbidden(err) {
				rev.Status.EvaluationError = err.Error()
			}
		}
		if len(verbs) == 0 {
			continue
		}
		kk := key{k.Group, strings.Join(verbs, ",")}
		if _, ok := byKey[kk]; !ok {
			keys = append(keys, kk)
		}
		if rs := byKey[kk]; len(rs) == 0 || rs[len(rs)-1] != k.Resource {
			byKey[kk] = append(rs, k.Resource)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].verbs < keys[j].verbs
	})
	rev.TypeMeta = kmetav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectRulesReview"}
	rev.Status.ResourceRules = []authzv1.ResourceRule{}
	for _, kk := range keys {
		rev.Status.ResourceRules = append(rev.Status.ResourceRules, authzv1.ResourceRule{
			Verbs: strings.Split(kk.verbs, ","), APIGroups: []string{kk.group}, Resources: byKey[kk]})
	}
	// Review and discovery endpoints are open to every user but bootstrap tokens.
	for _, e := range Endpoints {
		rev.Status.ResourceRules = append(rev.Status.ResourceRules, authzv1.ResourceRule{Verbs: e.Verbs, APIGroups: []string{e.Group}, Resources: []string{e.Resource}})
	}
	rev.Status.NonResourceRules = []authzv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi/*"}}}
	if u.InGroup(auth.GroupAdmins) {
		rev.Status.NonResourceRules = []authzv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
	}
	rev.Status.Incomplete = u.Seed != ""
	return &rev, nil
}

// whoAmI answers a SelfSubjectReview with the user's name and groups.
func whoAmI(u auth.User, contentType string, body []byte) (*authnv1.SelfSubjectReview, error) {
	var rev authnv1.SelfSubjectReview
	if err := decode(contentType, body, authnv1.SchemeGroupVersion, &rev); err != nil {
		return nil, err
	}
	rev.TypeMeta = kmetav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"}
	rev.Status.UserInfo = authnv1.UserInfo{Username: u.Name, Groups: u.Groups}
	if u.Seed != "" {
		rev.Status.UserInfo.Extra = map[string]authnv1.ExtraValue{"trellis.dev/seed": {u.Seed}}
	}
	return &rev, nil
}

func invalid(kind, field, reason string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s: %s: %s", kind, field, reason))
}
