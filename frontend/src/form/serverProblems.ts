/** A 422's problems sorted to the form's places. Pure: the views show them
 * (`showServerProblems` in `views/submitSpec.ts`). */

import { plural } from "../views/liveState";
import { errorTarget } from "./specPaths";

/** One problem the server found: the spec path its `loc` names, and its message. */
export interface ServerProblem {
  path: string;
  message: string;
}

export interface GroupedProblems {
  /** Messages by the target path that shows them (the longest known prefix of the
   * problem's path), in the order of first mention. A message for a path below its target
   * is prefixed with that path. */
  byTarget: Map<string, string[]>;
  /** Messages no target shows: above the form. */
  general: string[];
}

export function groupProblems(items: readonly ServerProblem[], targets: readonly string[]): GroupedProblems {
  const byTarget = new Map<string, string[]>();
  const general: string[] = [];
  for (const item of items) {
    const key = errorTarget(item.path, targets);
    if (key === "") {
      general.push(item.message);
      continue;
    }
    const message = key === item.path ? item.message : `${item.path}: ${item.message}`;
    byTarget.set(key, [...(byTarget.get(key) ?? []), message]);
  }
  return { byTarget, general };
}

/** What a form says above itself when its own check marked `count` problems before
 * sending: "Fix the 2 marked fields first." (`what`: "marked field"). */
export function fixFirstMessage(count: number, what: string): string {
  return `Fix the ${plural(count, what)} first.`;
}
