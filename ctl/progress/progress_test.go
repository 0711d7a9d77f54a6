package progress

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func decode(t *testing.T, s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestState(t *testing.T) {
	s := Of(decode(t, `{"metadata":{"generation":3,"annotations":{"gardener.cloud/operation":"reconcile"}},
	  "status":{"observedGeneration":2,"lastOperation":{"type":"Reconcile","state":"Processing","progress":45,
	  "description":"Waiting until the\nKubernetes API server is ready","lastUpdateTime":"2030-01-01T10:00:05Z"},
	  "lastErrors":[{"description":"infra failed","taskID":"deployInfrastructure","codes":["ERR_INFRA_UNAUTHORIZED"]}]}}`))
	if s.Type != "Reconcile" || s.State != "Processing" || s.Progress != 45 || s.Generation != 3 || s.ObservedGeneration != 2 ||
		s.Operation != "reconcile" || len(s.Errors) != 1 || s.Errors[0].Codes[0] != "ERR_INFRA_UNAUTHORIZED" {
		t.Fatalf("%+v", s)
	}
	if ended, _ := s.Final(); ended {
		t.Fatal("Processing ended")
	}
	want := "local: Reconcile Processing [#########...........] 45% - Waiting until the Kubernetes API server is ready\n" +
		"  error in deployInfrastructure (ERR_INFRA_UNAUTHORIZED): infra failed\n"
	if got := Render("local", s, true); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	asked := time.Date(2030, 1, 1, 10, 0, 5, 500e6, time.UTC)
	since := Since{Time: asked, Generation: 3, Annotation: "reconcile"}
	if since.Of(s) {
		t.Fatal("state with the operation annotation still set counts")
	}
	s.Operation, s.ObservedGeneration = "maintain", 3
	if since.Of(s) {
		t.Fatal("state with a maintain annotation, which leads to a reconcile, counts")
	}
	s.Operation = "rotate-ssh-keypair"
	if !since.Of(s) {
		t.Fatal("another annotation blocks")
	}
	s.Operation = ""
	if !since.Of(s) {
		t.Fatal("running operation after the request does not count")
	}
	old := s
	old.State, old.Updated = "Succeeded", asked.Add(-2*time.Second)
	if since.Of(old) {
		t.Fatal("an operation that ended before the request counts")
	}
	done := s
	done.State, done.Updated = "Failed", time.Date(2030, 1, 1, 10, 0, 5, 0, time.UTC) // same second: times are whole seconds
	if !since.Of(done) {
		t.Fatal("an outcome in the second of the request does not count")
	}
	if ended, ok := done.Final(); !ended || ok {
		t.Fatal("Failed is not a failed end")
	}
	if ended, ok := (State{Deleted: true}).Final(); !ended || !ok {
		t.Fatal("deleted is not a successful end")
	}
}

// TestSinceRotation follows `trellisctl shoot rotate-credentials --wait`: the rotation counts once the agent took the
// annotation up, observed the generation the annotation moved, and reported success with every rotation in the
// phase the operation leads to.
func TestSinceRotation(t *testing.T) {
	asked := time.Date(2030, 1, 1, 10, 0, 5, 0, time.UTC)
	state := func(op string, observed int, lastState, phase string) State {
		doc := `{"metadata":{"generation":4,"annotations":{"gardener.cloud/operation":"` + op + `"}},
		  "status":{"observedGeneration":` + string(rune('0'+observed)) + `,"lastOperation":{"type":"Reconcile","state":"` + lastState + `",
		  "lastUpdateTime":"2030-01-01T10:00:09Z"},"credentials":{"rotation":{"sshKeypair":{"lastInitiationTime":"2030-01-01T10:00:06Z"}`
		if phase != "" {
			doc += `,"certificateAuthorities":{"phase":"` + phase + `"},"serviceAccountKey":{"phase":"` + phase + `"},"etcdEncryptionKey":{"phase":"` + phase + `"}`
		}
		doc += `}}}}`
		return Of(decode(t, doc))
	}
	for _, c := range []struct {
		name  string
		since Since
		s     State
		want  bool
		ended bool
	}{
		{"annotation still set", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-start", Phase: "Prepared"},
			state("rotate-credentials-start", 3, "Succeeded", "Completed"), false, true},
		{"taken up, running", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-start", Phase: "Prepared"},
			state("", 4, "Processing", "Preparing"), true, false},
		{"succeeded, prepared", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-start", Phase: "Prepared"},
			state("", 4, "Succeeded", "Prepared"), true, true},
		{"succeeded before the phase moved", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-start", Phase: "Prepared"},
			state("", 4, "Succeeded", "Preparing"), false, true},
		{"succeeded without rotations", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-start", Phase: "Prepared"},
			state("", 4, "Succeeded", ""), false, true},
		{"complete, completed", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-complete", Phase: "Completed"},
			state("", 4, "Succeeded", "Completed"), true, true},
		{"complete, still prepared", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-complete", Phase: "Completed"},
			state("", 4, "Succeeded", "Prepared"), false, true},
		{"failed ends whatever the phase", Since{Time: asked, Generation: 4, Annotation: "rotate-credentials-complete", Phase: "Completed"},
			state("", 4, "Failed", "Completing"), true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.since.Of(c.s); got != c.want {
				t.Errorf("Of = %v, want %v (state %+v)", got, c.want, c.s)
			}
			if ended, _ := c.s.Final(); ended != c.ended {
				t.Errorf("Final ended = %v, want %v", ended, c.ended)
			}
		})
	}
	if s := state("", 4, "Succeeded", "Prepared"); len(s.Rotations) != 3 || s.Rotations["certificateAuthorities"] != "Prepared" {
		t.Errorf("rotations %v, want the three phases", s.Rotations)
	}
}

func TestView(t *testing.T) {
	var b bytes.Buffer
	now := func() time.Time { return time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC) }
	v := NewView(&b, 0, now)
	s := State{Type: "Create", State: "Processing", Progress: 10}
	v.Show("x", s)
	v.Show("x", s) // unchanged: not repeated
	s.Progress = 20
	v.Show("x", s)
	if got := b.String(); got != "12:00:00 x: Create Processing 10%\n12:00:00 x: Create Processing 20%\n" {
		t.Fatalf("%q", got)
	}
	b.Reset()
	v = NewView(&b, 30, now)
	v.Show("x", s)
	v.Show("x", State{Deleted: true})
	if got := b.String(); got != "x: Create Processing [####...\n\x1b[1A\x1b[Jx: deleted\n" {
		t.Fatalf("%q", got)
	}
}
