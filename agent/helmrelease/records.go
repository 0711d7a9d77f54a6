package helmrelease

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The release records are Helm's own: what its "secret" storage driver writes and reads, so that the helm CLI lists
// and reads the agent's releases, and releases recorded by Helm (or by agents that ran Helm's actions) are read.
//
//	Secret   sh.helm.release.v1.<name>.v<revision> in the release's namespace, type helm.sh/release.v1
//	labels   the release's own labels, then name, owner=helm, status, version, and createdAt (on create) or
//	         modifiedAt (on update), Unix seconds
//	data     release: base64 of the gzipped JSON of the release (Secret data is base64 again on the wire)
const (
	recordType      = "helm.sh/release.v1"
	recordOwner     = "helm"
	recordKeyPrefix = "sh.helm.release.v1."
)

// systemLabels are the record labels Helm sets itself; a release's own labels must not use them.
var systemLabels = []string{"name", "owner", "status", "version", "createdAt", "modifiedAt"}

// errNoRelease is history's answer for a release without records.
var errNoRelease = errors.New("release: not found")

// records reads and writes the release records of one namespace.
type records struct {
	secrets corev1client.SecretInterface
}

func recordKey(name string, version int) string {
	return recordKeyPrefix + name + ".v" + strconv.Itoa(version)
}

// history returns every revision of release name, oldest first, or errNoRelease when it has none.
func (r records) history(ctx context.Context, name string) ([]*release.Release, error) {
	list, err := r.secrets.List(ctx, metav1.ListOptions{LabelSelector: "owner=" + recordOwner + ",name=" + name})
	if err != nil {
		return nil, fmt.Errorf("listing the records of release %s: %w", name, err)
	}
	var out []*release.Release
	for i := range list.Items {
		s := &list.Items[i]
		rel, err := decodeRecord(s.Data["release"])
		if err != nil {
			return nil, fmt.Errorf("decoding release record %s: %w", s.Name, err)
		}
		rel.Labels = userLabels(s.Labels)
		out = append(out, rel)
	}
	if len(out) == 0 {
		return nil, errNoRelease
	}
	slices.SortFunc(out, func(a, b *release.Release) int { return a.Version - b.Version })
	return out, nil
}

// create records a new revision; it fails when the revision exists.
func (r records) create(ctx context.Context, rel *release.Release) error {
	s, err := newRecord(rel, "createdAt")
	if err != nil {
		return err
	}
	if _, err := r.secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recording revision %d of release %s: %w", rel.Version, rel.Name, err)
	}
	return nil
}

// update rewrites the record of a revision.
func (r records) update(ctx context.Context, rel *release.Release) error {
	s, err := newRecord(rel, "modifiedAt")
	if err != nil {
		return err
	}
	if _, err := r.secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the record of revision %d of release %s: %w", rel.Version, rel.Name, err)
	}
	return nil
}

// delete removes the record of a revision; one already gone is not an error.
func (r records) delete(ctx context.Context, name string, version int) error {
	err := r.secrets.Delete(ctx, recordKey(name, version), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the record of revision %d of release %s: %w", version, name, err)
	}
	return nil
}

// deployed returns the newest deployed revision in history (oldest first), or nil.
func deployed(history []*release.Release) *release.Release {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Info != nil && history[i].Info.Status == release.StatusDeployed {
			return history[i]
		}
	}
	return nil
}

// prune deletes the oldest revisions of a release until keep are left, never the deployed one, as Helm's storage
// does before it records a new revision (keep is then its max history minus one).
func (r records) prune(ctx context.Context, history []*release.Release, keep int) error {
	dep := deployed(history)
	left := len(history)
	for _, rel := range history {
		if left <= keep {
			break
		}
		if dep != nil && rel.Version == dep.Version {
			continue
		}
		if err := r.delete(ctx, rel.Name, rel.Version); err != nil {
			return err
		}
		left--
	}
	return nil
}

func newRecord(rel *release.Release, stamp string) (*corev1.Secret, error) {
	data, err := encodeRecord(rel)
	if err != nil {
		return nil, fmt.Errorf("encoding revision %d of release %s: %w", rel.Version, rel.Name, err)
	}
	labels := map[string]string{}
	for k, v := range rel.Labels {
		labels[k] = v
	}
	labels["name"] = rel.Name
	labels["owner"] = recordOwner
	labels["status"] = rel.Info.Status.String()
	labels["version"] = strconv.Itoa(rel.Version)
	labels[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: recordKey(rel.Name, rel.Version), Labels: labels},
		Type:       recordType,
		Data:       map[string][]byte{"release": data},
	}, nil
}

// encodeRecord is Helm's encoding: the release's JSON, gzipped at best compression, in base64.
func encodeRecord(rel *release.Release) ([]byte, error) {
	raw, err := json.Marshal(rel)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

// decodeRecord reads what encodeRecord wrote, and the uncompressed JSON of Helm's early releases.
func decodeRecord(data []byte) (*release.Release, error) {
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(raw, data)
	if err != nil {
		return nil, fmt.Errorf("data.release is not base64: %w", err)
	}
	raw = raw[:n]
	if len(raw) > 3 && bytes.Equal(raw[:3], []byte{0x1f, 0x8b, 0x08}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("data.release: %w", err)
		}
		// A record is at most a Secret's 1 MiB compressed; the cap bounds what a crafted one can inflate to.
		raw, err = io.ReadAll(io.LimitReader(zr, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("data.release: %w", err)
		}
	}
	var rel release.Release
	if err := json.Unmarshal(raw, &rel); err != nil {
		return nil, fmt.Errorf("data.release: %w", err)
	}
	if rel.Info == nil {
		return nil, errors.New("data.release: the release has no info")
	}
	return &rel, nil
}

// userLabels are a record's labels without Helm's system labels: the release's own.
func userLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !slices.Contains(systemLabels, k) {
			out[k] = v
		}
	}
	return out
}
