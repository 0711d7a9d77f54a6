package ctl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/hubtest"
)

// agentStatus writes a shoot's status as an agent would, with the CLI's generated update-status command.
func (c *cli) agentStatus(typ, state string, progress int, observed string, extra string) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"status":{"observedGeneration":%s,"lastOperation":{"type":%q,"state":%q,"progress":%d,"description":"step %d","lastUpdateTime":%q}%s}}`,
		observed, typ, state, progress, progress, time.Now().UTC().Format(time.RFC3339), extra)
	c.ok("update-status", "shoot", "local", "-p", "local", "--patch", patch)
}

func TestShootOperations(t *testing.T) {
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-maintenance", "shoot-hibernation"))
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
	for op, want := range map[string]string{"retry": "retry", "maintain": "maintain", "rotate-credentials": "rotate-credentials-start"} {
		c.ok("shoot", op, "local", "-p", "local")
		if got := c.ok("get", "shoot", "local", "-p", "local", "-o", `jsonpath={.metadata.annotations['gardener\.cloud/operation']}`); got != want+"\n" {
			t.Fatalf("%s: annotation %q", op, got)
		}
	}
	c.ok("shoot", "rotate-credentials", "local", "-p", "local", "--phase", "complete")
	contains(t, "bad phase", c.fails("shoot", "rotate-credentials", "local", "-p", "local", "--phase", "later"), "--phase")
	c.ok("shoot", "hibernate", "local", "-p", "local")
	contains(t, "hibernating", c.ok("get", "shoot", "local", "-p", "local"), "Hibernating")
	c.ok("shoot", "wake-up", "local", "-p", "local")
	contains(t, "awake", c.ok("get", "shoot", "local", "-p", "local"), "Awake")

	// The progress view follows the operation asked for until it ends; the agent is simulated.
	gen := strings.TrimSpace(c.ok("get", "shoot", "local", "-p", "local", "-o", "jsonpath={.metadata.generation}"))
	c.agentStatus("Reconcile", "Succeeded", 100, gen, "") // an earlier operation, which the view must not take for the new one's end
	var progress lines
	done := make(chan int, 1)
	go func() {
		done <- c.runTo(context.Background(), strings.NewReader(""), &progress, &progress, "shoot", "reconcile", "local", "-p", "local", "--wait", "--timeout", "60s")
	}()
	progress.waitFor(t, "annotated gardener.cloud/operation=reconcile", "local: Reconcile Succeeded 100%")
	time.Sleep(1100 * time.Millisecond) // lastUpdateTime has whole seconds
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
