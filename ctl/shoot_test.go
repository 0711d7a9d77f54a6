package ctl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// agentStatus writes a shoot's status as an agent would, with the CLI's generated update-status command.
func (c *cli) agentStatus(typ, state string, progress int, observed string, extra string) {
	c.t.Helper()
	c.agentStatusAt(time.Now(), typ, state, progress, observed, extra)
}

// agentStatusAt is agentStatus with lastOperation.lastUpdateTime at.
func (c *cli) agentStatusAt(at time.Time, typ, state string, progress int, observed string, extra string) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"status":{"observedGeneration":%s,"lastOperation":{"type":%q,"state":%q,"progress":%d,"description":"step %d","lastUpdateTime":%q}%s}}`,
		observed, typ, state, progress, progress, at.UTC().Format(time.RFC3339), extra)
	c.ok("update-status", "shoot", "local", "-p", "local", "--patch", patch)
}

func TestShootOperations(t *testing.T) {
	// No scheduler: the shoot has no seed to go to, and the scheduler's retries would write their Pending status
	// over the agent's simulated one.
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-maintenance", "shoot-hibernation"), func(c *hub.Config) { c.DisableScheduler = true })
	h.RegisterExtensions(t, "provider-local", hubtest.LocalExtensions()...) // the examples' types
	c := newCLI(t, h)
	// The local landscape's examples: a directory of manifests, applied in file order.
	out := c.ok("apply", "-f", "../test/landscape/examples")
	contains(t, "apply", out, "namespace/garden-local created", "project.core.gardener.cloud/local created", "shoot.core.gardener.cloud/local created")

	table := c.ok("get", "shoots", "-p", "local")
	contains(t, "shoot table", table, "CLOUDPROFILE", "PROVIDER", "REGION", "K8S VERSION", "HIBERNATION", "LAST OPERATION", "STATUS", "AGE",
		"local", "1.35.0", "Awake")
	contains(t, "wide", c.ok("get", "shoots", "-p", "local", "-o", "wide"), "SEED", "PURPOSE", "development")

	// Operation annotations and hibernation.
	if out := c.ok("shoot", "reconcile", "local", "-p", "local"); out != "shoot.core.gardener.cloud/local annotated gardener.cloud/operation=reconcile\n" {
		t.Fatalf("reconcile: %q", out)
	}
	annotation := func() string {
		return c.ok("get", "shoot", "local", "-p", "local", "-o", `jsonpath={.metadata.annotations['gardener\.cloud/operation']}`)
	}
	for op, want := range map[string]string{"retry": "retry", "maintain": "maintain"} {
		c.ok("shoot", op, "local", "-p", "local")
		if got := annotation(); got != want+"\n" {
			t.Fatalf("%s: annotation %q", op, got)
		}
	}
	contains(t, "bad phase", c.fails("shoot", "rotate-credentials", "local", "-p", "local", "--phase", "later"), "--phase")

	// Credentials rotation, with the hub's rules on the rotation phases; the agent is simulated.
	contains(t, "rotation before the shoot was created", c.fails("shoot", "rotate-credentials", "local", "-p", "local"),
		"metadata.annotations[gardener.cloud/operation]", "cannot start rotation of all credentials if shoot was not yet created successfully")
	c.agentStatus("Create", "Succeeded", 100, "1", "")
	c.ok("shoot", "rotate-credentials", "local", "-p", "local")
	if got := annotation(); got != "rotate-credentials-start\n" {
		t.Fatalf("rotate-credentials: annotation %q", got)
	}
	contains(t, "complete before prepared", c.fails("shoot", "rotate-credentials", "local", "-p", "local", "--phase", "complete"),
		"cannot complete rotation of all credentials if .status.credentials.rotation.certificateAuthorities.phase is not 'Prepared'")
	rotationStatus := func(phase string) string {
		return fmt.Sprintf(`,"credentials":{"rotation":{"certificateAuthorities":{"phase":%q},"serviceAccountKey":{"phase":%q},"etcdEncryptionKey":{"phase":%q}}}`, phase, phase, phase)
	}
	c.ok("patch", "shoot", "local", "-p", "local", "--patch", `{"metadata":{"annotations":{"gardener.cloud/operation":null}}}`)
	c.agentStatus("Reconcile", "Succeeded", 100, "2", rotationStatus("Prepared"))
	contains(t, "start while prepared", c.fails("shoot", "rotate-credentials", "local", "-p", "local"), "metadata.annotations[gardener.cloud/operation]",
		"cannot start rotation of all credentials if .status.credentials.rotation.certificateAuthorities.phase is not 'Completed'")
	// --wait ends when the rotation reached its phase, not at the first success reported.
	var rotation lines
	rotated := make(chan int, 1)
	go func() {
		rotated <- c.runTo(context.Background(), strings.NewReader(""), &rotation, &rotation, "shoot", "rotate-credentials", "local", "-p", "local", "--phase", "complete", "--wait", "--timeout", "60s")
	}()
	rotation.waitFor(t, "annotated for the credentials rotation")
	rgen := strings.TrimSpace(c.ok("get", "shoot", "local", "-p", "local", "-o", "jsonpath={.metadata.generation}"))
	if rgen != "3" {
		t.Fatalf("generation %s after rotate-credentials-complete, want 3 (the hub moves it for a rotation)", rgen)
	}
	// The status written before the request does not count: it is of generation 2.
	c.ok("patch", "shoot", "local", "-p", "local", "--patch", `{"metadata":{"annotations":{"gardener.cloud/operation":null}}}`)
	c.agentStatus("Reconcile", "Succeeded", 99, rgen, rotationStatus("Prepared"))
	rotation.waitFor(t, "local: Reconcile Succeeded 99% - step 99")
	select {
	case code := <-rotated:
		t.Fatalf("rotate-credentials --wait ended with exit %d before the rotation completed:\n%s", code, rotation.String())
	case <-time.After(200 * time.Millisecond):
	}
	c.agentStatus("Reconcile", "Succeeded", 100, rgen, rotationStatus("Completed"))
	if code := <-rotated; code != 0 {
		t.Fatalf("rotate-credentials --wait: exit %d:\n%s", code, rotation.String())
	}
	c.ok("shoot", "hibernate", "local", "-p", "local")
	contains(t, "hibernating", c.ok("get", "shoot", "local", "-p", "local"), "Hibernating")
	c.ok("shoot", "wake-up", "local", "-p", "local")
	contains(t, "awake", c.ok("get", "shoot", "local", "-p", "local"), "Awake")

	// The progress view follows the operation asked for until it ends; the agent is simulated.
	gen := strings.TrimSpace(c.ok("get", "shoot", "local", "-p", "local", "-o", "jsonpath={.metadata.generation}"))
	// An earlier operation, which the view must not take for the new one's end (lastUpdateTime has whole seconds:
	// it ended in an earlier second).
	c.agentStatusAt(time.Now().Add(-2*time.Second), "Reconcile", "Succeeded", 100, gen, "")
	var progress lines
	done := make(chan int, 1)
	go func() {
		done <- c.runTo(context.Background(), strings.NewReader(""), &progress, &progress, "shoot", "reconcile", "local", "-p", "local", "--wait", "--timeout", "60s")
	}()
	progress.waitFor(t, "annotated gardener.cloud/operation=reconcile", "local: Reconcile Succeeded 100%")
	c.ok("patch", "shoot", "local", "-p", "local", "--patch", `{"metadata":{"annotations":{"gardener.cloud/operation":null}}}`)
	c.agentStatus("Reconcile", "Processing", 40, gen, "")
	progress.waitFor(t, "local: Reconcile Processing 40% - step 40")
	c.agentStatus("Reconcile", "Error", 60, gen, `,"lastErrors":[{"description":"infrastructure is not ready","taskID":"waitInfrastructure","codes":["ERR_INFRA_DEPENDENCIES"]}]`)
	progress.waitFor(t, "error in waitInfrastructure (ERR_INFRA_DEPENDENCIES): infrastructure is not ready")
	select {
	case code := <-done:
		t.Fatalf("the view ended with exit %d at Error, which Gardener retries:\n%s", code, progress.String())
	case <-time.After(200 * time.Millisecond):
	}
	c.agentStatus("Reconcile", "Succeeded", 100, gen, "")
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, progress.String())
	}

	// A failed operation: progress shows it and exits non-zero at once.
	c.agentStatus("Reconcile", "Failed", 70, gen, `,"lastErrors":[{"description":"quota exceeded","codes":["ERR_INFRA_QUOTA_EXCEEDED"]}]`)
	out, errOut, code := c.run("shoot", "progress", "local", "-p", "local")
	if code == 0 || !strings.Contains(out, "local: Reconcile Failed 70% - step 70") || !strings.Contains(out, "quota exceeded") ||
		!strings.Contains(errOut, "shoot.core.gardener.cloud/local: Reconcile Failed") {
		t.Fatalf("progress of a failed operation: exit %d\n%s%s", code, out, errOut)
	}

	// wait: a condition, a JSONPath, a timeout.
	var waited lines
	go func() {
		done <- c.runTo(context.Background(), strings.NewReader(""), &waited, &waited, "wait", "shoot/local", "-p", "local", "--for=condition=APIServerAvailable", "--timeout", "60s")
	}()
	time.Sleep(300 * time.Millisecond)
	c.agentStatus("Reconcile", "Succeeded", 100, gen, `,"conditions":[{"type":"APIServerAvailable","status":"True","lastTransitionTime":"2030-01-01T00:00:00Z","lastUpdateTime":"2030-01-01T00:00:00Z","reason":"Healthy","message":"ok"}]`)
	if code := <-done; code != 0 || waited.String() != "shoot.core.gardener.cloud/local condition met\n" {
		t.Fatalf("wait for a condition: exit %d: %s", code, waited.String())
	}
	c.ok("wait", "shoot", "local", "-p", "local", "--for=jsonpath={.status.lastOperation.state}=Succeeded", "--timeout", "10s")
	contains(t, "wait timeout", c.fails("wait", "shoot", "local", "-p", "local", "--for=condition=EveryNodeReady", "--timeout", "500ms"),
		"timed out waiting for the condition on shoot.core.gardener.cloud/local")
	contains(t, "wait for a missing object", c.fails("wait", "shoot", "nope", "-p", "local", "--for=condition=X", "--timeout", "500ms"), "NotFound")

	// describe shows spec and status; the binding subresource is a generated command too.
	contains(t, "describe", c.ok("describe", "shoot", "local", "-p", "local"), "Namespace:", "garden-local", "Spec:", "cloudProfile:", "Status:", "lastOperation:")
	contains(t, "update-binding refuses a missing seed", c.fails("update-binding", "shoot", "local", "-p", "local", "--patch", `{"spec":{"seedName":"nowhere"}}`), "Error from server")
	contains(t, "subresource of the wrong kind", c.fails("update-binding", "project", "local", "--patch", "{}"), "projects has no update-binding")

	// Deleting a shoot needs Gardener's confirmation.
	contains(t, "delete", c.fails("delete", "shoot", "local", "-p", "local"), "Error from server (Forbidden)", "confirmation.gardener.cloud/deletion")
	contains(t, "delete --confirm", c.ok("delete", "shoot", "local", "-p", "local", "--confirm"), "shoot.core.gardener.cloud/local")
}
