// The hub's REST API as the page reaches it: through /dashboard/api, where the hub turns the HttpOnly session
// cookie into the bearer token. Scripts never see the token.
import type { KObject, Status, StatusCause } from "./types";

export const base = "/dashboard";
const headers = { "X-Trellis-Dashboard": "1" };

/** An error answer of the hub: its Kubernetes Status, with the field causes of a 422. */
export class ApiError extends Error {
  constructor(
    public code: number,
    public status: Status,
  ) {
    super(status.message || `HTTP ${code}`);
  }
  get causes(): StatusCause[] {
    return this.status.details?.causes ?? [];
  }
}

async function fail(res: Response): Promise<never> {
  let status: Status = { code: res.status, message: `${res.status} ${res.statusText}` };
  try {
    status = (await res.json()) as Status;
  } catch {
    /* not a Status body */
  }
  if (res.status === 401) window.dispatchEvent(new CustomEvent("trellis:unauthorized"));
  throw new ApiError(res.status, status);
}

/** request sends method to the hub path (e.g. /apis/core.gardener.cloud/v1beta1/seeds) and decodes the answer. */
export async function request<T>(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<T> {
  const init: RequestInit = { method, headers: { ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    (init.headers as Record<string, string>)["Content-Type"] = contentType;
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const res = await fetch(`${base}/api${path}`, init);
  if (!res.ok) return fail(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

export const get = <T>(path: string) => request<T>("GET", path);
export const create = <T>(path: string, obj: unknown) => request<T>("POST", path, obj);
export const replace = <T>(path: string, obj: unknown) => request<T>("PUT", path, obj);
export const mergePatch = <T>(path: string, patch: unknown) => request<T>("PATCH", path, patch, "application/merge-patch+json");
export const remove = (path: string) => request<Status>("DELETE", path);

export interface User {
  name: string;
  groups: string[];
  clusterAdmin: boolean;
}

/** session returns the logged-in user, or null. */
export async function session(): Promise<User | null> {
  const res = await fetch(`${base}/session`, { headers, credentials: "same-origin" });
  if (res.status === 401) return null;
  if (!res.ok) return fail(res);
  return (await res.json()) as User;
}

/** login checks token with the hub, which keeps it in an HttpOnly cookie. */
export async function login(token: string): Promise<User> {
  const res = await fetch(`${base}/session`, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ token }),
  });
  if (!res.ok) return fail(res);
  return (await res.json()) as User;
}

export async function logout(): Promise<void> {
  await fetch(`${base}/session`, { method: "DELETE", headers, credentials: "same-origin" });
}

/** key is an object's namespace/name. */
export const key = (o: KObject) => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

/** Paths of the kinds the dashboard reads. */
export const paths = {
  projects: "/apis/core.gardener.cloud/v1beta1/projects",
  seeds: "/apis/core.gardener.cloud/v1beta1/seeds",
  cloudProfiles: "/apis/core.gardener.cloud/v1beta1/cloudprofiles",
  controllerInstallations: "/apis/core.gardener.cloud/v1beta1/controllerinstallations",
  allShoots: "/apis/core.gardener.cloud/v1beta1/shoots",
  shoots: (ns: string) => `/apis/core.gardener.cloud/v1beta1/namespaces/${ns}/shoots`,
  shoot: (ns: string, name: string) => `/apis/core.gardener.cloud/v1beta1/namespaces/${ns}/shoots/${name}`,
  credentialsBindings: (ns: string) => `/apis/security.gardener.cloud/v1alpha1/namespaces/${ns}/credentialsbindings`,
  secretBindings: (ns: string) => `/apis/core.gardener.cloud/v1beta1/namespaces/${ns}/secretbindings`,
  events: (ns: string) => `/api/v1/namespaces/${ns}/events`,
  leases: (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
};
