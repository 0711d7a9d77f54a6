package shoot

import (
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestETCDBackupStoreOf: the local provider's etcd-backup secret gives the bucket directory; a secret without
// hostPath is another provider's (no snapshots, a warning); paths that would leave the bucket root are refused,
// naming the key.
func TestETCDBackupStoreOf(t *testing.T) {
	for _, tc := range []struct {
		name       string
		data       map[string]string
		wantDir    string
		wantErr    string
		wantWarned bool
	}{
		{"local", map[string]string{"hostPath": "/var/backups", "bucketName": "b-1"}, "/var/backups/b-1", "", false},
		{"another provider", map[string]string{"bucketName": "b-1", "accessKeyID": "x"}, "", "", true},
		{"relative root", map[string]string{"hostPath": "backups", "bucketName": "b"}, "", "hostPath", false},
		{"unclean root", map[string]string{"hostPath": "/var/../etc", "bucketName": "b"}, "", "hostPath", false},
		{"bucket with a slash", map[string]string{"hostPath": "/var/backups", "bucketName": "../etc"}, "", "bucketName", false},
		{"bucket ..", map[string]string{"hostPath": "/var/backups", "bucketName": ".."}, "", "bucketName", false},
		{"no bucket", map[string]string{"hostPath": "/var/backups"}, "", "bucketName", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			warned := false
			s, err := etcdBackupStoreOf(data, "shoot--p--s--uid", func(string) { warned = true })
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.wantDir == "" && s != nil:
				t.Fatalf("store %+v, want none", s)
			case tc.wantDir != "" && (s == nil || s.bucketDir != tc.wantDir || s.entry != "shoot--p--s--uid"):
				t.Fatalf("store %+v, want bucket directory %s", s, tc.wantDir)
			}
			if warned != tc.wantWarned {
				t.Fatalf("warned %v, want %v", warned, tc.wantWarned)
			}
		})
	}
}

// TestAddToPod: etcd's pod restores before etcd starts (an init container, as root, handing the files to etcd's
// user) and runs the sidecar on the entry's directory of the mounted bucket.
func TestAddToPod(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd"}}}
	(&etcdBackupStore{bucketDir: "/var/backups/b", entry: "e"}).addToPod(spec, "img", 30*time.Minute)
	if len(spec.InitContainers) != 1 || *spec.InitContainers[0].SecurityContext.RunAsUser != 0 ||
		!slices.Contains(spec.InitContainers[0].Command, "--store="+etcdBackupMount+"/e") ||
		!slices.Contains(spec.InitContainers[0].Command, "--data-dir="+etcdDataDir) {
		t.Fatalf("init containers: %+v", spec.InitContainers)
	}
	if len(spec.Containers) != 2 || spec.Containers[1].Name != "backup-restore" || !slices.Contains(spec.Containers[1].Command, "--interval=30m0s") {
		t.Fatalf("containers: %+v", spec.Containers)
	}
	v := spec.Volumes[len(spec.Volumes)-1]
	if v.HostPath == nil || v.HostPath.Path != "/var/backups/b" {
		t.Fatalf("bucket volume: %+v", v)
	}
}

// FuzzETCDBackupStoreOf: whatever an extension writes into etcd-backup, the bucket directory the pod mounts is a
// clean absolute path directly below hostPath.
func FuzzETCDBackupStoreOf(f *testing.F) {
	f.Add("/var/backups", "b-1")
	f.Add("/", "..")
	f.Add("/a/./b", "c/d")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, root, bucket string) {
		s, err := etcdBackupStoreOf(map[string][]byte{"hostPath": []byte(root), "bucketName": []byte(bucket)}, "e", func(string) {})
		if err != nil || s == nil {
			return
		}
		if !path.IsAbs(s.bucketDir) || path.Clean(s.bucketDir) != s.bucketDir || path.Dir(s.bucketDir) != path.Clean(root) {
			t.Fatalf("hostPath %q bucketName %q: bucket directory %q is not directly below the root", root, bucket, s.bucketDir)
		}
	})
}

// TestOldPods: after a rollout, a terminating pod or one of another pod template is old; one template's running pods
// are not.
func TestOldPods(t *testing.T) {
	pod := func(name, hash string, terminating bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: kmetav1.ObjectMeta{Name: name, Labels: map[string]string{"pod-template-hash": hash}}}
		if terminating {
			p.DeletionTimestamp = &kmetav1.Time{Time: time.Now()}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"one current", []corev1.Pod{pod("new", "b", false)}, ""},
		{"old terminating", []corev1.Pod{pod("old", "a", true), pod("new", "b", false)}, "old is terminating"},
		{"two templates", []corev1.Pod{pod("new", "b", false), pod("old", "a", false)}, "old is of another pod template"},
	} {
		if got := oldPods(tc.pods); got != tc.want {
			t.Errorf("%s: oldPods = %q, want %q", tc.name, got, tc.want)
		}
	}
}
