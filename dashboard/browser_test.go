package dashboard_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestDashboard drives the dashboard in Chromium against a real hub: login, the live shoot table, the shoot page
// and its actions, the create form, the YAML editor's 422s, a viewer's and an outsider's view, and the seeds page.
// The subtests share the hub and the browser and run in order.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-maintenance", "controllerregistration-seed"))
	br := startBrowser(t, h)
	landscape(t, h)
	aliceToken, vicToken, bobToken := h.UserToken(t, alice), h.UserToken(t, vic), h.UserToken(t, bob)

	p := br.newPage(t)
	t.Run("login", func(t *testing.T) {
		p.t = t
		p.goTo("/")
		p.do(waitVisible("textarea[name=token]"))
		p.shot("login")
		p.fill("textarea[name=token]", "trl_not-a-token")
		p.click("button[type=submit]")
		p.waitJS("the refusal", `document.querySelector("[role=alert]")?.innerText.includes("invalid bearer token")`)
		p.fill("textarea[name=token]", aliceToken)
		p.click("button[type=submit]")
		p.waitJS("the projects", `!!document.querySelector("[data-project=dev]")`)
		if got := p.text("[data-testid=user]"); got != alice {
			t.Errorf("user shown: %q, want %q", got, alice)
		}
		if p.exists("[data-project=ops]") {
			t.Error("alice sees project ops, of which she is no member")
		}
		// The token is in an HttpOnly cookie: no script of the page (nor of any other origin) reads it.
		if c := eval[string](p, "document.cookie"); strings.Contains(c, "trl_") || strings.Contains(c, "trellis") {
			t.Errorf("document.cookie shows the session: %q", c)
		}
		if s := eval[string](p, "JSON.stringify(localStorage) + JSON.stringify(sessionStorage)"); strings.Contains(s, aliceToken) {
			t.Error("the token is in web storage")
		}
		p.shot("projects")
	})

	t.Run("shoot moves from Pending to Succeeded live", func(t *testing.T) {
		p.t = t
		p.click("[data-project=dev]")
		p.waitJS("shoot web in the table", `!!document.querySelector("tr[data-shoot=web] .name")`)
		if got := p.text("tr[data-shoot=web] td:nth-child(5)"); got != "aws-eu1" {
			t.Errorf("seed column: %q", got)
		}
		// A marker on window survives only if the page never reloads.
		eval[bool](p, "(window.__noReload = true)")
		setStatus(t, h, "garden-dev", "web", map[string]any{"lastOperation": map[string]any{"type": "Create", "state": "Pending", "progress": 0, "description": "Waiting for the seed's agent"}})
		p.waitJS("Pending", `document.querySelector("tr[data-shoot=web] .operation")?.dataset.state === "Pending"`)
		setStatus(t, h, "garden-dev", "web", map[string]any{"lastOperation": map[string]any{"type": "Create", "state": "Processing", "progress": 45, "description": "Deploying Shoot control plane"}})
		p.waitJS("Processing 45%", `document.querySelector("tr[data-shoot=web] .operation")?.dataset.progress === "45"`)
		// The delay from the write to the page showing it: the page notes when the row changes (MutationObserver,
		// run right after the DOM update), the test when the write returned.
		eval[bool](p, `(() => { const row = document.querySelector("tr[data-shoot=web]");
			window.__seen = 0;
			new MutationObserver(() => { if (!window.__seen && row.querySelector(".operation")?.dataset.state === "Succeeded") window.__seen = Date.now(); })
				.observe(row, {subtree: true, attributes: true, childList: true, characterData: true});
			return true; })()`)
		now := time.Now().UTC().Format(time.RFC3339)
		setStatus(t, h, "garden-dev", "web", map[string]any{
			"lastOperation": map[string]any{"type": "Create", "state": "Succeeded", "progress": 100, "description": "Shoot cluster has been successfully created", "lastUpdateTime": now},
			"conditions":    conditions(now, "True"),
		})
		written := time.Now()
		p.waitJS("Succeeded", `window.__seen > 0`)
		seen := eval[int64](p, "window.__seen")
		t.Logf("measured: watch event to page: %d ms (write returned → row shows Succeeded)", seen-written.UnixMilli())
		if !eval[bool](p, "window.__noReload === true") {
			t.Error("the page reloaded")
		}
		p.waitJS("condition chips", `document.querySelectorAll("tr[data-shoot=web] [data-condition][data-status=True]").length === 5`)
		if !p.exists(`tr[data-shoot=db] [data-condition=EveryNodeReady][data-status=False]`) {
			t.Error("db's failing condition is not shown")
		}
		// Sort and filter.
		p.click("button[data-sort=name]") // descending
		if first := eval[string](p, `document.querySelector("tr.shoot")?.dataset.shoot`); first != "web" {
			t.Errorf("first row sorted by name descending: %q", first)
		}
		p.fill("input[type=search]", "deprecated-nothing-matches")
		p.waitJS("filter", `document.querySelectorAll("tr.shoot").length === 0`)
		p.fill("input[type=search]", "1.32")
		p.waitJS("filter 1.32", `document.querySelectorAll("tr.shoot").length === 1 && !!document.querySelector("tr[data-shoot=db]")`)
		p.fill("input[type=search]", "")
		p.click("button[data-sort=name]")
		p.waitJS("all rows", `document.querySelectorAll("tr.shoot").length === 6`)
		p.shot("shoots")
	})

	t.Run("create from the form with a 422 at its field", func(t *testing.T) {
		p.t = t
		p.click("[data-testid=create-shoot]")
		p.waitJS("the form with the profile's defaults", `document.querySelector("select[name=version]")?.value === "1.33.4"`)
		if got := eval[string](p, `[...document.querySelectorAll("select[name=version] option")].map(o => o.innerText).join(",")`); got != "1.34.1 (preview),1.33.4 (supported),1.32.8 (deprecated)" {
			t.Errorf("versions offered: %q", got)
		}
		if got := eval[string](p, `document.querySelector("select[name=binding]").value`); got != "aws-creds" {
			t.Errorf("credentials binding: %q", got)
		}
		p.fill("input[name=name]", "api")
		p.do(setSelect("select[name=machineType]", "m5.xlarge"), setSelect("select[name=volumeType]", "io1"))
		p.click(`input[type=checkbox][value=eu-west-1b]`)
		p.fill("input[name=minimum]", "3")
		p.fill("input[name=maximum]", "1")
		p.waitJS("the YAML view", `document.querySelector("[data-testid=create-yaml]").innerText.includes("type: m5.xlarge")`)
		p.click("[data-testid=create]")
		p.waitJS("the 422 at the minimum", `document.querySelector("[data-error-for=minimum]")?.innerText.includes("must not be greater than maximum")`)
		if !p.exists("input[name=minimum].invalid") {
			t.Error("the minimum field is not marked invalid")
		}
		p.shot("create-invalid")
		p.fill("input[name=maximum]", "4")
		p.click("[data-testid=create]")
		p.waitJS("the new shoot's page", `location.pathname === "/dashboard/projects/dev/shoots/api" && !!document.querySelector("[data-testid=actions]")`)
		s := getShoot(t, h, "api")
		for path, want := range map[string]any{"spec.region": "eu-west-1", "spec.kubernetes.version": "1.33.4", "spec.credentialsBindingName": "aws-creds", "spec.purpose": "evaluation"} {
			if got := field(s, path); got != want {
				t.Errorf("created shoot %s = %v, want %v", path, got, want)
			}
		}
		w := field(s, "spec.provider.workers").([]any)[0].(map[string]any)
		if w["maximum"] != float64(4) || w["minimum"] != float64(3) || field(w, "machine.type") != "m5.xlarge" || field(w, "volume.type") != "io1" || fmt.Sprint(w["zones"]) != "[eu-west-1a eu-west-1b]" {
			t.Errorf("created worker: %v", w)
		}
	})

	t.Run("hibernate and wake up", func(t *testing.T) {
		p.t = t
		p.goTo("/projects/dev/shoots/web")
		p.do(waitVisible("[data-action=hibernate]"))
		p.click("[data-action=hibernate]")
		p.do(waitVisible("[data-testid=confirm]"))
		p.click("[data-testid=confirm]")
		p.waitDialogClosed()
		eventually(t, "spec.hibernation.enabled=true", func() bool { return field(getShoot(t, h, "web"), "spec.hibernation.enabled") == true })
		p.do(waitVisible("[data-action=wake-up]"))
		p.click("[data-action=wake-up]")
		eventually(t, "spec.hibernation.enabled=false", func() bool { return field(getShoot(t, h, "web"), "spec.hibernation.enabled") != true })
		p.do(waitVisible("[data-action=hibernate]"))
	})

	t.Run("reconcile, maintain and retry", func(t *testing.T) {
		p.t = t
		clearOp := func(name string) {
			mustDo(t, h, "PATCH", shootsDev+"/"+name, `{"metadata":{"annotations":{"gardener.cloud/operation":null}}}`, 200, "Content-Type", mergePtch)
		}
		for _, op := range []string{"reconcile", "maintain"} {
			p.waitJS(op+" enabled", fmt.Sprintf(`!document.querySelector("[data-action=%s]").disabled`, op))
			if !eval[bool](p, `document.querySelector("[data-action=retry]").disabled`) {
				t.Error("retry is offered for a shoot whose last operation succeeded")
			}
			p.click("[data-action=" + op + "]")
			eventually(t, op, func() bool { return annotation(getShoot(t, h, "web"), "gardener.cloud/operation") == op })
			p.waitJS("the operation waiting", `!!document.querySelector("[data-testid=pending-operation]") && document.querySelector("[data-action=reconcile]").disabled`)
			clearOp("web")
			p.waitJS("the operation taken up", `!document.querySelector("[data-testid=pending-operation]")`)
		}
		p.goTo("/projects/dev/shoots/db") // its last operation ended in Error
		p.waitJS("retry enabled", `!!document.querySelector("[data-action=retry]") && !document.querySelector("[data-action=retry]").disabled`)
		p.click("[data-action=retry]")
		eventually(t, "retry", func() bool { return annotation(getShoot(t, h, "db"), "gardener.cloud/operation") == "retry" })
		clearOp("db")
		p.goTo("/projects/dev/shoots/web")
		p.do(waitVisible("[data-action=rotate-start]"))
	})

	t.Run("rotate credentials", func(t *testing.T) {
		p.t = t
		p.waitJS("rotation can start", `!document.querySelector("[data-action=rotate-start]").disabled && document.querySelector("[data-action=rotate-complete]").disabled`)
		p.click("[data-action=rotate-start]")
		eventually(t, "rotate-credentials-start", func() bool {
			return annotation(getShoot(t, h, "web"), "gardener.cloud/operation") == "rotate-credentials-start"
		})
		p.do(waitVisible("[data-testid=pending-operation]"))
		// The agent takes the operation up: phases Preparing, then Prepared, and the annotation goes.
		now := time.Now().UTC().Format(time.RFC3339)
		phase := func(ph string) map[string]any {
			r := map[string]any{"phase": ph, "lastInitiationTime": now}
			return map[string]any{"credentials": map[string]any{"rotation": map[string]any{"certificateAuthorities": r, "serviceAccountKey": r, "etcdEncryptionKey": r}}}
		}
		setStatus(t, h, "garden-dev", "web", phase("Preparing"))
		p.waitJS("Preparing", `document.querySelectorAll("[data-testid=rotation] [data-phase=Preparing]").length === 3`)
		mustDo(t, h, "PATCH", shootsDev+"/web", `{"metadata":{"annotations":{"gardener.cloud/operation":null}}}`, 200, "Content-Type", mergePtch)
		setStatus(t, h, "garden-dev", "web", phase("Prepared"))
		p.waitJS("Prepared, complete enabled", `document.querySelectorAll("[data-testid=rotation] [data-phase=Prepared]").length === 3 && !document.querySelector("[data-action=rotate-complete]").disabled`)
		p.shot("shoot")
		p.click("[data-action=rotate-complete]")
		eventually(t, "rotate-credentials-complete", func() bool {
			return annotation(getShoot(t, h, "web"), "gardener.cloud/operation") == "rotate-credentials-complete"
		})
		mustDo(t, h, "PATCH", shootsDev+"/web", `{"metadata":{"annotations":{"gardener.cloud/operation":null}}}`, 200, "Content-Type", mergePtch)
		setStatus(t, h, "garden-dev", "web", phase("Completed"))
		p.waitJS("Completed", `document.querySelectorAll("[data-testid=rotation] [data-phase=Completed]").length === 3`)
	})

	t.Run("last errors, constraints and events", func(t *testing.T) {
		p.t = t
		p.goTo("/projects/dev/shoots/legacy")
		p.do(waitVisible("[data-testid=last-error]"))
		if got := p.text("[data-testid=last-error]"); !strings.Contains(got, "out of capacity") || !strings.Contains(got, "ERR_INFRA_RESOURCES_DEPLETED") || !strings.Contains(got, "Deploying worker pools") {
			t.Errorf("last error shown as %q", got)
		}
		if !p.exists("[data-constraint=HibernationPossible]") {
			t.Error("the constraint is not shown")
		}
		if got := p.text("[data-condition=EveryNodeReady]"); !strings.Contains(got, "False") || !strings.Contains(got, "checked by the test") {
			t.Errorf("condition shown as %q", got)
		}
		p.shot("shoot-failed")
		p.goTo("/projects/dev/shoots/web?tab=events")
		p.waitJS("the event", `document.querySelector("[data-testid=events]")?.innerText.includes("Hibernating cluster due to schedule")`)
	})

	t.Run("YAML editor shows the 422 at its line", func(t *testing.T) {
		p.t = t
		p.goTo("/projects/dev/shoots/web?tab=yaml")
		p.waitJS("the YAML", `document.querySelector("[data-testid=yaml]")?.value.includes("version: 1.33.4")`)
		eval[bool](p, `(() => { const ta = document.querySelector("[data-testid=yaml]");
			ta.value = ta.value.replace("version: 1.33.4", "version: 1.33.x"); ta.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)
		p.click("[data-testid=yaml-save]")
		p.waitJS("the cause", `!!document.querySelector("[data-testid=yaml-error] li[data-field='spec.kubernetes.version']")`)
		line := eval[int](p, `document.querySelector("[data-testid=yaml]").value.split("\n").findIndex(l => l.includes("version: 1.33.x")) + 1`)
		if got := p.text("[data-testid=yaml-error] li[data-field='spec.kubernetes.version'] strong"); got != fmt.Sprintf("line %d", line) {
			t.Errorf("cause shown at %q, the field is on line %d", got, line)
		}
		if !eval[bool](p, fmt.Sprintf(`document.querySelectorAll(".editor .gutter div")[%d].classList.contains("bad")`, line-1)) {
			t.Error("the gutter does not mark the line")
		}
		p.shot("yaml-invalid")
	})

	t.Run("delete by typing the name", func(t *testing.T) {
		p.t = t
		p.goTo("/projects/dev/shoots/api")
		p.do(waitVisible("[data-action=delete]"))
		p.click("[data-action=delete]")
		p.do(waitVisible("[data-testid=confirm-name]"))
		p.fill("[data-testid=confirm-name]", "ap")
		if !eval[bool](p, `document.querySelector("[data-testid=confirm]").disabled`) {
			t.Error("delete enabled before the name is typed")
		}
		p.fill("[data-testid=confirm-name]", "api")
		p.waitJS("delete enabled", `!document.querySelector("[data-testid=confirm]").disabled`)
		p.click("[data-testid=confirm]")
		eventually(t, "shoot api deleted", func() bool {
			code, _ := h.Do(t, "GET", shootsDev+"/api", nil)
			return code == 404
		})
		p.waitJS("back at the project", `location.pathname === "/dashboard/projects/dev"`)
	})

	t.Run("viewer sees no actions and the hub refuses", func(t *testing.T) {
		v := br.newPage(t)
		v.login(vicToken)
		v.goTo("/projects/dev")
		v.waitJS("the shoots", `!!document.querySelector("tr[data-shoot=web]")`)
		if v.exists("[data-testid=create-shoot]") {
			t.Error("a viewer is offered to create shoots")
		}
		v.goTo("/projects/dev/shoots/web")
		v.do(waitVisible("[data-testid=readonly]"))
		if v.exists("[data-testid=actions]") || v.exists("[data-action]") {
			t.Error("a viewer sees action buttons")
		}
		if code := v.fetchStatus("PATCH", shootsDev+"/web", `{"spec":{"hibernation":{"enabled":true}}}`, mergePtch); code != 403 {
			t.Errorf("a viewer's patch through the dashboard: %d, want 403", code)
		}
		if code := v.fetchStatus("DELETE", shootsDev+"/web", "", "application/json"); code != 403 {
			t.Errorf("a viewer's delete through the dashboard: %d, want 403", code)
		}
		v.shot("viewer")
		// Logging out forgets the session: the login form is back and the bridge answers 401.
		v.click(".whoami button")
		v.do(waitVisible("textarea[name=token]"))
		if code := v.fetchStatus("GET", shootsDev, "", "application/json"); code != 401 {
			t.Errorf("the bridge after logout: %d, want 401", code)
		}
	})

	t.Run("another project's user sees nothing of it", func(t *testing.T) {
		o := br.newPage(t)
		o.login(bobToken)
		o.waitJS("own project", `!!document.querySelector("[data-project=ops]")`)
		if o.exists("[data-project=dev]") {
			t.Error("bob sees project dev")
		}
		o.goTo("/projects/dev")
		o.do(waitVisible("[data-testid=no-project]"))
		if o.exists("tr[data-shoot]") {
			t.Error("bob sees shoots of dev")
		}
		if code := o.fetchStatus("GET", shootsDev, "", "application/json"); code != 403 {
			t.Errorf("bob's list of dev's shoots: %d, want 403", code)
		}
		if code := o.fetchStatus("GET", "/apis/core.gardener.cloud/v1beta1/projects/dev", "", "application/json"); code != 404 {
			t.Errorf("bob's get of project dev: %d, want 404", code)
		}
		// The fleet view lists the shoots of every project of the user's, and only those.
		o.click("[data-testid=all-shoots]")
		o.waitJS("bob's shoots", `!!document.querySelector("tr[data-shoot=monitoring]")`)
		if n := eval[int](o, `document.querySelectorAll("tr.shoot").length`); n != 1 {
			t.Errorf("bob's fleet holds %d shoots, want 1 (monitoring of ops)", n)
		}
		p.t = t
		p.click("[data-testid=all-shoots]")
		p.waitJS("alice's fleet", `document.querySelectorAll("tr.shoot").length === 6 && !document.querySelector("tr[data-shoot=monitoring]")`)
		if got := p.text("tr[data-shoot=web] td:first-child"); got != "dev" {
			t.Errorf("project column of web: %q", got)
		}
		p.shot("fleet")
		if n := eval[int](o, `fetch("/dashboard/api/apis/core.gardener.cloud/v1beta1/shoots", {headers: {"X-Trellis-Dashboard": "1"}}).then(r => r.json()).then(l => l.items.filter(s => s.metadata.namespace === "garden-dev").length)`); n != 0 {
			t.Errorf("bob's list of all shoots holds %d of dev's", n)
		}
	})

	t.Run("seeds", func(t *testing.T) {
		a := br.newPage(t)
		a.login(h.Token)
		a.goTo("/seeds")
		a.do(waitVisible("[data-seed=aws-eu1]"))
		a.waitJS("capacity", `document.querySelector("[data-seed=aws-eu1] [data-testid=capacity]").innerText.includes("7 / 200 shoots")`)
		// The heartbeat was written when the test set up its landscape: seconds ago, or minutes on a loaded machine.
		if got := a.text("[data-seed=aws-eu1] [data-testid=heartbeat]"); !regexp.MustCompile(`^[0-9]+[sm] ago$`).MatchString(got) {
			t.Errorf("heartbeat: %q, want seconds or minutes ago", got)
		}
		if got := a.text("[data-seed=aws-eu1] [data-testid=cert-expiry]"); !strings.HasPrefix(got, "in ") {
			t.Errorf("certificate expiry: %q", got)
		}
		a.click("[data-seed=aws-eu1] button[aria-expanded]")
		a.waitJS("the seed's shoots", `!!document.querySelector("[data-seed=aws-eu1] a[href='/dashboard/projects/ops/shoots/monitoring']")`)
		a.waitJS("the seed's extension", `document.querySelector("[data-seed=aws-eu1] [data-testid=installations]")?.innerText.includes("provider-aws-x7k2p")`)
		if n := eval[int](a, `document.querySelectorAll("[data-seed=aws-eu1] [data-testid=installations] [data-condition][data-status=True]").length`); n != 4 {
			t.Errorf("%d true conditions of the installation shown, want 4", n)
		}
		a.shot("seeds")
		// Users who are not cluster admins have no seeds page in the menu.
		if p.exists(`a[href="/dashboard/seeds"]`) {
			t.Error("alice is offered the seeds page")
		}
	})
}
