package hub_test

import (
	"strconv"
	"strings"
	"testing"
)

// TestRESTAnswersAreTheWrittenState: a REST write's answer is encoded once and becomes the written state's memoized
// encoding (store.WithEncodedAnswer). What a later get, list or watch serves is then exactly the answer, and never
// what only an answer shows: a dry run's state at the current resourceVersion, or a token revealed at its creation.
func TestRESTAnswersAreTheWrittenState(t *testing.T) {
	h := quietHub(t)
	const cms = "/api/v1/namespaces/answers/configmaps"
	do := func(want int, method, path, body string, header ...string) string {
		t.Helper()
		code, out := h.Do(t, method, path, body, header...)
		if code != want {
			t.Fatalf("%s %s: want %d, got %d: %s", method, path, want, code, out)
		}
		return string(out)
	}
	do(201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"answers"}}`)
	// A watch from before the writes sees every written state as the answers showed it.
	watch := rawWatch(t, h, cms, listVersion(t, h, cms))

	answers := []string{do(201, "POST", cms, `{"metadata":{"name":"cm"},"data":{"a":"1"}}`)}
	if got := do(200, "GET", cms+"/cm", ""); got != answers[0] {
		t.Fatalf("get after the create:\n%s\nwant the create's answer:\n%s", got, answers[0])
	}
	rv := decodeObject(t, []byte(answers[0])).Metadata.ResourceVersion
	answers = append(answers, do(200, "PUT", cms+"/cm", `{"metadata":{"name":"cm","resourceVersion":"`+rv+`"},"data":{"a":"2"}}`))
	if got := do(200, "GET", cms+"/cm", ""); got != answers[1] {
		t.Fatalf("get after the update:\n%s\nwant the update's answer:\n%s", got, answers[1])
	}
	answers = append(answers, do(200, "PATCH", cms+"/cm", `{"data":{"a":"3"}}`, "Content-Type", "application/merge-patch+json"))
	if got := do(200, "GET", cms+"/cm", ""); got != answers[2] {
		t.Fatalf("get after the patch:\n%s\nwant the patch's answer:\n%s", got, answers[2])
	}

	// A dry run answers another state at the same resourceVersion: reads still serve the stored one.
	cur := decodeObject(t, []byte(answers[2]))
	dry := do(200, "PUT", cms+"/cm?dryRun=All", `{"metadata":{"name":"cm","resourceVersion":"`+cur.Metadata.ResourceVersion+`"},"data":{"a":"dry"}}`)
	if o := decodeObject(t, []byte(dry)); o.Data["a"] != "dry" || o.Metadata.ResourceVersion != cur.Metadata.ResourceVersion {
		t.Fatalf("dry-run update answered %s", dry)
	}
	if got := do(200, "GET", cms+"/cm", ""); got != answers[2] {
		t.Fatalf("get after a dry run:\n%s\nwant the stored state:\n%s", got, answers[2])
	}
	if list := do(200, "GET", cms, ""); !strings.Contains(list, answers[2]) {
		t.Fatalf("list after a dry run does not hold the stored state %s:\n%s", answers[2], list)
	}
	// A deletion answers the last state at the deletion's resourceVersion, as the watch's DELETED event carries it.
	deleted := do(200, "DELETE", cms+"/cm", "")
	if o := decodeObject(t, []byte(deleted)); o.Data["a"] != "3" || revision(t, o.Metadata.ResourceVersion) <= revision(t, cur.Metadata.ResourceVersion) {
		t.Fatalf("delete answered %s after %s", deleted, answers[2])
	}
	answers = append(answers, deleted)
	for i, want := range answers {
		ev := nextEvent(t, watch)
		if !strings.Contains(ev, `"object":`+strings.TrimSpace(want)) {
			t.Fatalf("watch event %d:\n%s\nwant the object of the answer:\n%s", i, ev, want)
		}
	}

	// A deletion that finalizers hold up answers the object marked for deletion, and reads serve that answer.
	held := do(201, "POST", cms, `{"metadata":{"name":"held","finalizers":["test/hold"]},"data":{"a":"1"}}`)
	marked := do(200, "DELETE", cms+"/held", "")
	if o := decodeObject(t, []byte(marked)); o.Metadata.DeletionTimestamp == "" || o.Metadata.ResourceVersion == decodeObject(t, []byte(held)).Metadata.ResourceVersion {
		t.Fatalf("delete held by a finalizer answered %s", marked)
	}
	if got := do(200, "GET", cms+"/held", ""); got != marked {
		t.Fatalf("get after the deletion started:\n%s\nwant the delete's answer:\n%s", got, marked)
	}

	// An access token is revealed only in the answer to its creation.
	const tokens = "/apis/auth.trellis.dev/v1alpha1/namespaces/trellis-system/accesstokens"
	created := do(201, "POST", tokens, `{"metadata":{"name":"tok"},"spec":{"user":"u@example.com"}}`)
	if !strings.Contains(created, `"token":"`) {
		t.Fatalf("the create's answer shows no token: %s", created)
	}
	for _, path := range []string{tokens + "/tok", tokens} {
		if got := do(200, "GET", path, ""); strings.Contains(got, `"token":"`) || !strings.Contains(got, `"tokenHash"`) {
			t.Fatalf("GET %s shows the token or no hash: %s", path, got)
		}
	}
}

func revision(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}
