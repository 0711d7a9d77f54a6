// The page's routes, read from the location under /dashboard/ (the hub answers every such path with index.html).
import { base } from "./api";

export type Route =
  | { page: "projects" }
  | { page: "shoots"; project: string }
  | { page: "shoot"; project: string; name: string; tab: string }
  | { page: "create"; project: string }
  | { page: "seeds" }
  | { page: "allshoots" }
  | { page: "notfound" };

function parse(loc: Location): Route {
  const parts = loc.pathname.slice(base.length).split("/").filter(Boolean).map(decodeURIComponent);
  const tab = new URLSearchParams(loc.search).get("tab") ?? "overview";
  if (parts.length === 0) return { page: "projects" };
  if (parts[0] === "seeds" && parts.length === 1) return { page: "seeds" };
  if (parts[0] === "shoots" && parts.length === 1) return { page: "allshoots" };
  if (parts[0] === "projects" && parts.length === 2) return { page: "shoots", project: parts[1] };
  if (parts[0] === "projects" && parts.length === 3 && parts[2] === "create") return { page: "create", project: parts[1] };
  if (parts[0] === "projects" && parts.length === 4 && parts[2] === "shoots") return { page: "shoot", project: parts[1], name: parts[3], tab };
  return { page: "notfound" };
}

class Router {
  route = $state<Route>(parse(window.location));
  constructor() {
    window.addEventListener("popstate", () => (this.route = parse(window.location)));
  }
  go(path: string, replace = false) {
    const url = base + path;
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    this.route = parse(window.location);
    window.scrollTo(0, 0);
  }
}

export const router = new Router();

/** link is an action for <a href>: in-page navigation without a reload, the href kept for new tabs. */
export function link(node: HTMLAnchorElement) {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const href = node.getAttribute("href") ?? "";
    if (!href.startsWith(base)) return;
    e.preventDefault();
    router.go(href.slice(base.length) || "/");
  };
  node.addEventListener("click", onClick);
  return { destroy: () => node.removeEventListener("click", onClick) };
}

export const href = (path: string) => base + path;
