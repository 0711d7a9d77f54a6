// Names for the generated API types (src/api, from the hub's OpenAPI documents); nothing here is declared by hand.
import type { components as core } from "../api/core-v1beta1";
import type { components as security } from "../api/security-v1alpha1";
import type { components as v1 } from "../api/v1";
import type { components as coordination } from "../api/coordination-v1";

type C = core["schemas"];
export type Shoot = C["trellis.core.v1beta1.Shoot"];
export type ShootList = C["trellis.core.v1beta1.ShootList"];
export type Project = C["trellis.core.v1beta1.Project"];
export type Seed = C["trellis.core.v1beta1.Seed"];
export type CloudProfile = C["trellis.core.v1beta1.CloudProfile"];
export type ControllerInstallation = C["trellis.core.v1beta1.ControllerInstallation"];
export type Condition = C["trellis.meta.v1.Condition"];
export type LastError = C["trellis.meta.v1.LastError"];
export type LastOperation = C["trellis.meta.v1.LastOperation"];
export type ObjectMeta = C["trellis.meta.v1.ObjectMeta"];
export type Status = C["trellis.meta.v1.Status"];
export type StatusCause = C["trellis.meta.v1.StatusCause"];
export type CredentialsBinding = security["schemas"]["trellis.security.v1alpha1.CredentialsBinding"];
export type Event = v1["schemas"]["trellis.kubernetes.core.v1.Event"];
export type Lease = coordination["schemas"]["trellis.kubernetes.coordination.v1.Lease"];

/** Any object the hub serves: it has metadata. */
export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}
