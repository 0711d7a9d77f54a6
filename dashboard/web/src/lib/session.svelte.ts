// The logged-in user and the projects they may see, shared by every page.
import { session as fetchSession, login as doLogin, logout as doLogout, paths, type User } from "./api";
import { Live } from "./live.svelte";
import type { Project } from "./types";

class Session {
  user = $state<User | null>(null);
  checked = $state(false);
  projects: Live<Project> | null = $state(null);

  async check() {
    try {
      this.set(await fetchSession());
    } finally {
      this.checked = true;
    }
  }
  async login(token: string) {
    this.set(await doLogin(token));
  }
  async logout() {
    await doLogout();
    this.set(null);
  }
  private set(u: User | null) {
    this.projects?.close();
    this.user = u;
    this.projects = u ? new Live<Project>(paths.projects) : null;
  }
  /** project returns the project of the given name, if the user sees it. */
  project(name: string): Project | undefined {
    return this.projects?.items.get(`/${name}`);
  }
}

export const session = new Session();
window.addEventListener("trellis:unauthorized", () => {
  if (session.user) void session.check();
});
