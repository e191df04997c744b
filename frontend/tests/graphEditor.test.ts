// The New Run form's graph editor, its pure parts: the JSON text, the starting graph for an
// env, the spec it sends, and where the server's problems with the graph are shown.
import { describe, expect, it } from "vitest";

import type { EnvInfo } from "../src/api/types";
import { buildRunSpec, type RunFormInput } from "../src/form/runSpec";
import { runFormInput } from "./runFormInput";
import { groupProblems } from "../src/form/serverProblems";
import { locToPath } from "../src/form/specPaths";
import { graphTemplate, parseGraphJson } from "../src/network/graphJson";
import { netGraph } from "../src/network/netGraph";
import { networkSummary } from "../src/network/networkSvg";

const GRAPH = {
  populations: [
    { name: "in", size: 3, input_from: "obs" },
    { name: "out", size: 4, output_to: "action" },
    { name: "critic", size: 1, output_to: "value" },
  ],
  connections: [
    { src: "in", dst: "out" },
    { src: "in", dst: "critic" },
  ],
  actions: { action: "action" },
};

describe("the graph editor's JSON", () => {
  it("reads an object and sets its kind", () => {
    const parsed = parseGraphJson(JSON.stringify(GRAPH));
    expect(parsed).toEqual({ ok: true, network: { ...GRAPH, kind: "graph" } });
  });

  it("says where the JSON breaks, never throws", () => {
    // `"size": 3,}` : the parser stops at the "}" on line 3.
    const text = '{\n  "populations": [\n    {"name": "in", "size": 3,}\n  ]\n}';
    const parsed = parseGraphJson(text);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.message).toMatch(/^invalid JSON/);
    expect(parsed.message).toMatch(/line 3/);
    for (const bad of ["", "   ", "[1, 2]", "null", "42", '{"kind": "mlp"}', "{", '{"a": }'])
      expect(parseGraphJson(bad).ok, bad).toBe(false);
    expect(parseGraphJson("[]")).toEqual({
      ok: false,
      message: "the graph must be a JSON object {populations, connections, …}",
    });
  });
});

describe("the starting graph", () => {
  const env = (extra: Partial<EnvInfo>): EnvInfo => ({ name: "E", ...extra }) as EnvInfo;

  it("has an input per observation key with its features, and heads sized for the env", () => {
    const graph = graphTemplate(env({ observation_size: { state: [4], target: [2, 3] }, action_size: 2 }));
    const populations = graph.populations as { name: string; size: number; input_from?: string }[];
    expect(populations.filter((p) => p.input_from).map((p) => [p.name, p.size, p.input_from])).toEqual([
      ["in_state", 4, "state"],
      ["in_target", 6, "target"],
    ]);
    // 2 x 2 actions: a mean and a raw std per action.
    expect(populations.find((p) => p.name === "policy")?.size).toBe(4);
    const drawn = netGraph(graph);
    expect(drawn?.problems).toEqual([]);
    expect(drawn && networkSummary(drawn)).toBe("5 populations, 5 connections (1 delayed)");
    expect(drawn?.nodes.filter((n) => n.role === "action").map((n) => n.id)).toEqual(["policy"]);
    expect(drawn?.nodes.filter((n) => n.role === "value").map((n) => n.id)).toEqual(["critic"]);
  });

  it("gives each reward stream a value output, and works before the env is known", () => {
    const graph = graphTemplate(env({ observation_size: 5, action_size: 1, reward_streams: ["a", "b"] }));
    expect(graph.value).toEqual({ a: "value_a", b: "value_b" });
    expect(
      netGraph(graph)
        ?.nodes.filter((n) => n.role === "value")
        .map((n) => n.note),
    ).toEqual(["value: a", "value: b"]);
    expect(netGraph(graphTemplate(undefined))?.problems).toEqual([]);
  });
});

describe("a graph run from the form", () => {
  const input = (extra: Partial<RunFormInput>): RunFormInput => runFormInput({ network: "graph", ...extra });

  it("sends the editor's graph as the network", () => {
    const { spec, problems } = buildRunSpec(input({ graph: parseGraphJson(JSON.stringify(GRAPH)) }));
    expect(problems).toEqual([]);
    expect(spec.network).toEqual({ ...GRAPH, kind: "graph" });
  });

  it("keeps a graph that does not parse from being sent, marked on the network", () => {
    const { problems } = buildRunSpec(input({ graph: parseGraphJson("{") }));
    expect(problems).toHaveLength(1);
    expect(problems[0]?.path).toBe("network");
    expect(problems[0]?.message).toMatch(/^invalid JSON/);
    // Another kind ignores the editor.
    expect(buildRunSpec(input({ network: "mlp", graph: parseGraphJson("{") })).problems).toEqual([]);
  });

  it("shows the server's problems inside the graph under its editor", () => {
    const path = locToPath(["body", "network", "connections", 2, "delay"]);
    const { byTarget, general } = groupProblems(
      [
        { path, message: "zero-delay cycle" },
        { path: "network.kind", message: "bad kind" },
      ],
      ["network", "network.kind", "config.ppo"],
    );
    expect(byTarget.get("network")).toEqual(["network.connections.2.delay: zero-delay cycle"]);
    expect(byTarget.get("network.kind")).toEqual(["bad kind"]);
    expect(general).toEqual([]);
  });
});
