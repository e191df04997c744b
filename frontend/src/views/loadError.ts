/** What a page shows when its first read of the thing it shows fails. Pure. */

import { ApiError } from "../api/http";

/** The message for a failed first load of `what` (`run`, `sweep`) `id`; null for a 401,
 * which the access page handles. */
export function loadErrorMessage(error: unknown, what: string, id: string): string | null {
  if (error instanceof ApiError && error.status === 401) return null;
  if (error instanceof ApiError && error.status === 404) return `There is no ${what} ${id}.`;
  return `Could not load the ${what}: ${error instanceof Error ? error.message : String(error)}`;
}
