// The Status bodies kube-apiserver answers errors with, worded as upstream words them:
// staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go (NewNotFound, NewForbidden, NewInvalid,
// NewTooManyRequests, NewInternalError, NewServiceUnavailable, NewGenericServerResponse), read at
// kubernetes/kubernetes 030880a5; the RBAC denial's reason from the apiserver's
// endpoints/handlers/responsewriters (forbiddenMessage); the 503 of a server that has not yet
// installed its paths from apiserver/pkg/util/notfoundhandler.

import type { ResourceType } from '../../src/kube/resources.ts';

export interface Status {
  readonly kind: 'Status';
  readonly apiVersion: 'v1';
  readonly metadata: Record<string, never>;
  readonly status: 'Failure';
  readonly message: string;
  readonly reason: string;
  readonly details?: Record<string, unknown>;
  readonly code: number;
}

export function status(
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): Status {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

function group(resource: ResourceType): string {
  return resource.apiVersion.includes('/') ? resource.apiVersion.split('/')[0]! : '';
}

/** `services` or `servicecidrs.networking.k8s.io`: schema.GroupResource's String(). */
function qualified(resource: ResourceType): string {
  const g = group(resource);
  return g ? `${resource.plural}.${g}` : resource.plural;
}

/**
 * A path inside a served group-version that names no resource of it (servicecidrs under
 * networking.k8s.io/v1 before 1.33): go-restful's 404, turned into a Status by
 * NewGenericServerResponse, with empty details.
 */
export function pathNotFound(): Status {
  return status(404, 'NotFound', 'the server could not find the requested resource', {});
}

/**
 * RBAC's denial (NewForbidden with the authorizer's reason), for a list, watch or get, to the user
 * kube-proxy's bootstrap role (system:node-proxier) is bound to.
 */
export function forbidden(
  route: {
    readonly resource: ResourceType;
    readonly namespace: string | undefined;
    readonly name: string | undefined;
  },
  method: string,
  query: URLSearchParams,
): Status {
  const { resource, namespace, name } = route;
  const watching = query.get('watch') === 'true' || query.get('watch') === '1';
  const verb =
    method === 'GET' ? (name !== undefined ? 'get' : watching ? 'watch' : 'list') : method.toLowerCase();
  const scope = namespace === undefined ? 'at the cluster scope' : `in the namespace "${namespace}"`;
  const reason = `User "system:kube-proxy" cannot ${verb} resource "${resource.plural}" in API group "${group(resource)}" ${scope}`;
  const subject = name === undefined ? qualified(resource) : `${qualified(resource)} "${name}"`;
  return status(403, 'Forbidden', `${subject} is forbidden: ${reason}`, {
    ...(name === undefined ? {} : { name }),
    ...(group(resource) ? { group: group(resource) } : {}),
    kind: resource.plural,
  });
}

/** NewInvalid of one field error. */
export function invalid(resource: ResourceType, name: string, field: string, message: string): Status {
  const g = group(resource);
  const kind = g ? `${resource.kind}.${g}` : resource.kind;
  return status(422, 'Invalid', `${kind} "${name}" is invalid: ${message}`, {
    name,
    ...(g ? { group: g } : {}),
    kind: resource.kind,
    causes: [{ reason: 'FieldValueNotSupported', message: message.slice(field.length + 2), field }],
  });
}

/** A watch asking for sendInitialEvents where the WatchList gate is off: ListOptions validation. */
export function watchListRefused(): Status {
  const field = 'sendInitialEvents';
  const message =
    'Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled';
  return status(422, 'Invalid', `ListOptions.meta.k8s.io "" is invalid: ${field}: ${message}`, {
    group: 'meta.k8s.io',
    kind: 'ListOptions',
    causes: [{ reason: 'FieldValueForbidden', message, field }],
  });
}

export function internalError(cause: string): Status {
  return status(500, 'InternalError', `Internal error occurred: ${cause}`, { causes: [{ message: cause }] });
}

/** The answers of a server failing a request, by code (429: NewTooManyRequests' Status form). */
export function faultStatus(code: number, retryAfterSeconds: number | undefined): Status {
  switch (code) {
    case 429:
      return status(429, 'TooManyRequests', 'injected fault: 429', {
        retryAfterSeconds: retryAfterSeconds ?? 1,
      });
    case 503:
      return status(
        503,
        'ServiceUnavailable',
        'the request has been made before all known HTTP paths have been installed, please try again',
      );
    case 410:
      return status(410, 'Expired', 'injected fault: too old resource version');
    default:
      return internalError(`injected fault: ${code}`);
  }
}
