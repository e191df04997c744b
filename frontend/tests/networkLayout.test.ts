import { describe, expect, it } from "vitest";

import {
  assignLayers,
  delayText,
  layoutNetwork,
  MAX_RADIUS,
  MIN_RADIUS,
  nodeRadius,
  type NetLayout,
} from "../src/network/layout";
import { netGraph, type NetGraph } from "../src/network/netGraph";

/** The example graph. */
const EXAMPLE = {
  kind: "graph",
  normalize_obs: true,
  populations: [
    { name: "in_state", size: 4, input_from: "state" },
    { name: "in_target", size: 2, input_from: "target" },
    { name: "hidden", size: 32, activation: "swish" },
    { name: "arm", size: 4, output_to: "arm" },
    { name: "critic", size: 1, output_to: "value" },
  ],
  connections: [
    { src: "in_state", dst: "hidden" },
    { src: "in_target", dst: "hidden" },
    { src: "hidden", dst: "hidden", delay: 1 },
    { src: "hidden", dst: "arm" },
    { src: "hidden", dst: "critic" },
  ],
  actions: { arm: "arm" },
  value: "value",
};

const graphOf = (network: unknown): NetGraph => {
  const graph = netGraph(network);
  if (!graph) throw new Error("no graph");
  return graph;
};

/** Six populations with delayed reciprocal edges between two chains. */
const SIX = {
  kind: "graph",
  populations: [
    { name: "in", size: 8, input_from: "obs" },
    { name: "a", size: 64 },
    { name: "b", size: 64 },
    { name: "c", size: 16 },
    { name: "pi", size: 4, output_to: "pi" },
    { name: "v", size: 1, output_to: "value" },
  ],
  connections: [
    { src: "in", dst: "a" },
    { src: "in", dst: "b" },
    { src: "a", dst: "b", delay: 2, reciprocal: true },
    { src: "a", dst: "c" },
    { src: "c", dst: "a", delay: 1 },
    { src: "c", dst: "pi" },
    { src: "b", dst: "v" },
  ],
  actions: { pi: "pi" },
};

function expectNoOverlaps(layout: NetLayout): void {
  for (const [i, p] of layout.nodes.entries())
    for (const q of layout.nodes.slice(i + 1)) {
      if (p.layer === q.layer)
        // Same column: the lower node's circle starts below the upper one's labels.
        expect(Math.abs(p.y - q.y)).toBeGreaterThanOrEqual(p.r + q.r + 34);
      else expect(Math.abs(p.x - q.x)).toBeGreaterThan(p.r + q.r + 60);
    }
}

describe("netGraph", () => {
  it("reads a population graph: roles, notes, units, edges", () => {
    const graph = graphOf(EXAMPLE);
    expect(graph.nodes.map((n) => [n.id, n.role, n.units, n.note])).toEqual([
      ["in_state", "input", 4, "obs: state"],
      ["in_target", "input", 2, "obs: target"],
      ["hidden", "hidden", 32, "swish"],
      ["arm", "action", 4, "action: arm"],
      ["critic", "value", 1, "value"],
    ]);
    expect(graph.edges).toHaveLength(5);
    expect(graph.edges[2]).toEqual({ src: "hidden", dst: "hidden", delay: 1 });
    expect(graph.problems).toEqual([]);
  });

  it("draws a reciprocal connection as two edges and leaves out what it cannot draw", () => {
    const graph = graphOf({
      kind: "graph",
      populations: [{ name: "a", size: 2, input_from: "obs" }, { name: "b", size: 3 }, { name: "a" }, 7],
      connections: [{ src: "a", dst: "b", delay: 3, reciprocal: true }, { src: "b", dst: "nope" }, "x"],
      actions: {},
    });
    expect(graph.nodes.map((n) => n.id)).toEqual(["a", "b"]);
    expect(graph.edges).toEqual([
      { src: "a", dst: "b", delay: 3 },
      { src: "b", dst: "a", delay: 3 },
    ]);
    expect(graph.problems).toEqual([
      'populations[2].name: "a" is named twice',
      "populations[3]: a population needs a name",
      'connections[1].dst: no population "nope"',
      "connections[2]: a connection is an object {src, dst, delay}",
    ]);
  });

  it("draws mlp and lstm actor-critics in layers with the factories' defaults", () => {
    const mlp = graphOf({ kind: "mlp", critic_hidden_sizes: [32] });
    expect(mlp.nodes.map((n) => `${n.id}:${n.units ?? "?"}`)).toEqual([
      "obs:?",
      "actor 1:64",
      "actor 2:64",
      "action:?",
      "critic 1:32",
      "value:1",
    ]);
    expect(mlp.edges.every((e) => e.delay === 0)).toBe(true);
    const lstm = graphOf({ kind: "lstm", lstm_size: 16 });
    expect(lstm.edges).toContainEqual({ src: "actor lstm", dst: "actor lstm", delay: 1 });
    expect(lstm.nodes.find((n) => n.id === "critic lstm")?.units).toBe(16);
    const asymmetric = graphOf({ kind: "mlp", policy_obs_key: "state", value_obs_key: "privileged" });
    expect(asymmetric.nodes.filter((n) => n.role === "input").map((n) => n.note)).toEqual([
      "obs: state",
      "obs: privileged",
    ]);
    expect(netGraph({ kind: "plugin:mine" })).toBeNull();
    expect(netGraph("graph")).toBeNull();
  });
});

describe("layout", () => {
  it("layers by the longest undelayed path from the inputs", () => {
    expect(Object.fromEntries(assignLayers(graphOf(EXAMPLE)))).toEqual({
      in_state: 0,
      in_target: 0,
      hidden: 1,
      arm: 2,
      critic: 2,
    });
    // in -> a -> c -> pi and in -> b -> v: the delayed a <-> b and c -> a do not count;
    // v, an output that feeds nothing, moves to the last layer beside pi.
    expect(Object.fromEntries(assignLayers(graphOf(SIX)))).toEqual({
      in: 0,
      a: 1,
      b: 1,
      c: 2,
      pi: 3,
      v: 3,
    });
  });

  it("survives a zero-delay cycle (a graph the server refuses)", () => {
    const graph = graphOf({
      kind: "graph",
      populations: [
        { name: "in", size: 1, input_from: "obs" },
        { name: "a", size: 1 },
        { name: "b", size: 1 },
      ],
      connections: [
        { src: "in", dst: "a" },
        { src: "a", dst: "b" },
        { src: "b", dst: "a" },
      ],
    });
    const layout = layoutNetwork(graph);
    expect(layout.nodes.map((n) => n.layer).every(Number.isFinite)).toBe(true);
    expect(layout.edges.map((e) => e.shape)).toContain("back");
  });

  it("sizes nodes by their units", () => {
    expect(nodeRadius(1)).toBe(MIN_RADIUS);
    // 10 + 3 * log2(32) = 25
    expect(nodeRadius(32)).toBe(25);
    expect(nodeRadius(64)).toBeGreaterThan(nodeRadius(32));
    expect(nodeRadius(1 << 16)).toBe(MAX_RADIUS);
  });

  it("places nodes without overlaps, inside the box, in layer columns", () => {
    for (const spec of [EXAMPLE, SIX, { kind: "mlp" }, { kind: "lstm" }]) {
      const layout = layoutNetwork(graphOf(spec));
      expectNoOverlaps(layout);
      const { x, y, width, height } = layout.box;
      for (const n of layout.nodes) {
        expect(n.x - n.r).toBeGreaterThanOrEqual(x);
        expect(n.y - n.r).toBeGreaterThanOrEqual(y);
        expect(n.x + n.r).toBeLessThanOrEqual(x + width);
        expect(n.y + n.r).toBeLessThanOrEqual(y + height);
      }
      for (const p of layout.nodes)
        for (const q of layout.nodes) if (p.layer < q.layer) expect(p.x).toBeLessThan(q.x);
    }
  });

  it("orders a layer by its predecessors' rows", () => {
    // b is fed by in2 (row 1) and a by in1 (row 0): a is drawn above b though listed after.
    const layout = layoutNetwork(
      graphOf({
        kind: "graph",
        populations: [
          { name: "in1", size: 1, input_from: "x" },
          { name: "in2", size: 1, input_from: "y" },
          { name: "b", size: 1 },
          { name: "a", size: 1 },
        ],
        connections: [
          { src: "in2", dst: "b" },
          { src: "in1", dst: "a" },
        ],
      }),
    );
    const y = Object.fromEntries(layout.nodes.map((n) => [n.id, n.y]));
    expect(y.a).toBeLessThan(y.b as number);
  });

  it("draws self-loops, curved back edges and delay labels at the middle", () => {
    const layout = layoutNetwork(graphOf(SIX));
    const shapes = layout.edges.map((e) => `${e.src}->${e.dst}:${e.shape}:${e.label?.text ?? ""}`);
    expect(shapes).toEqual([
      "in->a:forward:",
      "in->b:forward:",
      "a->b:back:d=2",
      "b->a:back:d=2",
      "a->c:forward:",
      "c->a:back:d=1",
      "c->pi:forward:",
      "b->v:forward:",
    ]);
    // The two back edges between a and b bow to opposite sides: their labels do not meet.
    const [ab, ba] = [layout.edges[2], layout.edges[3]];
    expect(
      Math.hypot((ab?.label?.x ?? 0) - (ba?.label?.x ?? 0), (ab?.label?.y ?? 0) - (ba?.label?.y ?? 0)),
    ).toBeGreaterThan(40);
    expect(layout.edges[2]?.path).toMatch(/^M [\d.-]+ [\d.-]+ Q /);
    expect(layout.edges[0]?.path).toMatch(/^M [\d.-]+ [\d.-]+ L /);

    const example = layoutNetwork(graphOf(EXAMPLE));
    const loop = example.edges[2];
    const hidden = example.nodes[2];
    expect(loop?.shape).toBe("self");
    expect(loop?.label?.text).toBe(delayText(1));
    // The loop's label is above the node, centred on it.
    expect(loop?.label?.x).toBeCloseTo(hidden?.x ?? NaN, 1);
    expect(loop?.label?.y).toBeLessThan((hidden?.y ?? 0) - (hidden?.r ?? 0));
    expect(example.edges.filter((e) => e.label).length).toBe(1);
  });

  it("puts a straight edge's label halfway", () => {
    const layout = layoutNetwork(
      graphOf({
        kind: "graph",
        populations: [
          { name: "in", size: 4, input_from: "obs" },
          { name: "h", size: 4 },
        ],
        connections: [{ src: "in", dst: "h", delay: 5 }],
      }),
    );
    const [inNode, h] = layout.nodes;
    const edge = layout.edges[0];
    // A delayed edge still goes forward where its target is in a later layer (h has no
    // undelayed input: layer 1). The line runs rim to rim (the end 4 px short for the arrow).
    expect(edge?.shape).toBe("forward");
    const startX = (inNode?.x ?? 0) + (inNode?.r ?? 0);
    const endX = (h?.x ?? 0) - (h?.r ?? 0) - 4;
    expect(edge?.label?.x).toBeCloseTo((startX + endX) / 2, 0);
    expect(edge?.label?.text).toBe("d=5");
  });
});
