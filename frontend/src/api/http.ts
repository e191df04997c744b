/**
 * JSON over fetch, same origin. The browser authenticates with the `nnx_ppo_token` cookie
 * that the server set when the user opened the printed URL, so no token is handled here.
 */

import type { ValidationErrorItem } from "./types";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The field-level errors of a 422 answer, or an empty list. */
  get validationErrors(): ValidationErrorItem[] {
    const detail = (this.body as { detail?: unknown } | null)?.detail;
    if (!Array.isArray(detail)) return [];
    return detail.filter(
      (item): item is ValidationErrorItem =>
        typeof item === "object" && item !== null && Array.isArray(item.loc),
    );
  }
}

type UnauthorizedListener = () => void;
const unauthorizedListeners = new Set<UnauthorizedListener>();

/** Called whenever an API call answers 401 (no or wrong token). */
export function onUnauthorized(listener: UnauthorizedListener): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

function describe(status: number, body: unknown): string {
  const detail = (body as { detail?: unknown } | null)?.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join(".")}: ${d.msg ?? ""}`)
      .join("; ");
  }
  return `HTTP ${status}`;
}

export async function requestJson<T>(method: string, path: string, body?: unknown): Promise<T> {
  const text = await request(method, path, "application/json", body);
  return (text ? JSON.parse(text) : null) as T;
}

export async function requestText(method: string, path: string): Promise<string> {
  return request(method, path, "text/plain");
}

async function request(method: string, path: string, accept: string, body?: unknown): Promise<string> {
  const init: RequestInit = { method, headers: { Accept: accept } };
  if (body !== undefined) {
    init.headers = { ...init.headers, "Content-Type": "application/json" };
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed: unknown = null;
  if (text && !response.ok) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  if (!response.ok) {
    if (response.status === 401) unauthorizedListeners.forEach((listener) => listener());
    throw new ApiError(response.status, parsed, describe(response.status, parsed));
  }
  return text;
}

/** `path?k=v&...`, leaving out undefined, null and empty values. */
export function withQuery(path: string, query: Record<string, string | number | null | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}
