/**
 * The New Run form's graph editor, its pure parts: the JSON text to a `network` object
 * (with a parse error's line and column), and a starting graph that fits the picked env.
 */

import type { EnvInfo } from "../api/types";

export type GraphParse = { ok: true; network: Record<string, unknown> } | { ok: false; message: string };

/** Line and column (from 1) of character `position` of `text`. */
function lineColumn(text: string, position: number): { line: number; column: number } {
  const before = text.slice(0, position).split("\n");
  return { line: before.length, column: (before[before.length - 1] ?? "").length + 1 };
}

/** The editor's text as a graph network (`kind` set to "graph"), or what is wrong with it:
 * a JSON syntax error with its line and column, or JSON that is not an object. */
export function parseGraphJson(text: string): GraphParse {
  if (!text.trim())
    return { ok: false, message: "the graph is empty: a JSON object {populations, connections, …}" };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const at = /at position (\d+)/.exec(message);
    if (at && !/line \d+/.test(message)) {
      const { line, column } = lineColumn(text, Number(at[1]));
      return { ok: false, message: `invalid JSON at line ${line}, column ${column}: ${message}` };
    }
    return { ok: false, message: `invalid JSON: ${message}` };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    return { ok: false, message: "the graph must be a JSON object {populations, connections, …}" };
  const network = parsed as Record<string, unknown>;
  if (network.kind !== undefined && network.kind !== "graph")
    return { ok: false, message: `kind must be "graph" here (the Network kind picks the others)` };
  return { ok: true, network: { ...network, kind: "graph" } };
}

/** Features of each observation key: `{obs: n}` for an array observation. */
function obsFeatures(size: EnvInfo["observation_size"]): Record<string, number> {
  if (typeof size === "number") return { obs: size };
  if (!size) return { obs: 4 };
  return Object.fromEntries(
    Object.entries(size).map(([key, shape]) => [key, shape.reduce((a, b) => a * b, 1)]),
  );
}

/** A graph that builds for `env`: one input per observation key, a recurrent hidden
 * population (a delay-1 self-connection), an action head of 2 x the action size (a mean
 * and a raw std per action) and a one-unit value. Sizes are placeholders when the env is
 * not known yet. */
export function graphTemplate(env: EnvInfo | undefined): Record<string, unknown> {
  const inputs = Object.entries(obsFeatures(env?.observation_size)).map(([key, size]) => ({
    name: `in_${key}`,
    size,
    input_from: key,
  }));
  const actionSize = env?.action_size ?? 2;
  const streams = env?.reward_streams ?? null;
  const values = streams?.length
    ? streams.map((s) => ({ name: `value_${s}`, stream: s }))
    : [{ name: "critic", stream: null }];
  return {
    kind: "graph",
    normalize_obs: true,
    populations: [
      ...inputs,
      { name: "hidden", size: 32, activation: "swish" },
      { name: "policy", size: 2 * actionSize, output_to: "action" },
      ...values.map((v) => ({
        name: v.name,
        size: 1,
        output_to: v.stream === null ? "value" : `value_${v.stream}`,
      })),
    ],
    connections: [
      ...inputs.map((i) => ({ src: i.name, dst: "hidden" })),
      { src: "hidden", dst: "hidden", delay: 1 },
      { src: "hidden", dst: "policy" },
      ...values.map((v) => ({ src: "hidden", dst: v.name })),
    ],
    actions: { action: "action" },
    value: streams?.length ? Object.fromEntries(streams.map((s) => [s, `value_${s}`])) : "value",
  };
}
