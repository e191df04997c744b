/**
 * Where each node and edge of a `NetGraph` is drawn. Pure: `networkSvg` renders the result.
 *
 * Order of work:
 * 1. Layers (columns, left to right): an input is in layer 0; any other node one past the
 *    deepest node that feeds it through an undelayed edge (the longest path from the
 *    inputs), at least 1. Delayed edges do not count, so recurrent loops do not push nodes
 *    right; a zero-delay cycle (a graph the server refuses) is broken where it closes.
 *    Action and value outputs that feed nothing undelayed move to the last layer.
 * 2. Order within a layer: the spec's order, then sorted by the mean row of the node's
 *    undelayed predecessors (one barycentre sweep, fewer crossings).
 * 3. Positions: a node's radius grows with the log of its units; each column stacks its
 *    nodes with room for their labels and is centred on the tallest column.
 * 4. Edges: a forward edge is a straight line between the circles' rims; an edge to an
 *    earlier or the same layer (a back edge) is a curve bowed below the straight line; an
 *    edge from a node to itself is a loop above it. A delayed edge has a label at its middle.
 */

import type { NetEdge, NetGraph, NetNode } from "./netGraph";

export interface PlacedNode extends NetNode {
  layer: number;
  x: number;
  y: number;
  r: number;
}

export type EdgeShape = "forward" | "back" | "self";

export interface PlacedEdge extends NetEdge {
  shape: EdgeShape;
  /** SVG path data, from the source's rim to the target's rim. */
  path: string;
  /** Where the delay label goes (the middle of the path); null for an undelayed edge. */
  label: { x: number; y: number; text: string } | null;
}

export interface NetLayout {
  /** The drawing's box (the SVG viewBox): every node, label, loop and bow is inside. */
  box: { x: number; y: number; width: number; height: number };
  nodes: PlacedNode[];
  edges: PlacedEdge[];
}

export const MIN_RADIUS = 10;
export const MAX_RADIUS = 36;
/** The radius of a node whose units are unknown (the env's observation or action). */
export const UNKNOWN_RADIUS = 18;
const COLUMN_GAP = 170;
/** Room under each node for its name and note. */
const LABEL_ROOM = 34;
const ROW_GAP = 18;
const MARGIN = 24;
/** Room above the top row for self-loops and back edges' bows. */
const LOOP_ROOM = 34;
/** Half the width a node's name and note take under it. */
const LABEL_HALF_WIDTH = 60;

/** A node's radius: 10 for one unit, growing with log2(units), at most 36. */
export function nodeRadius(units: number | null): number {
  if (units === null) return UNKNOWN_RADIUS;
  return Math.min(MAX_RADIUS, MIN_RADIUS + 3 * Math.log2(Math.max(1, units)));
}

/** The text of a delayed edge's label. */
export function delayText(delay: number): string {
  return `d=${delay}`;
}

/** Layers by longest undelayed path from the inputs (see the module docstring). */
export function assignLayers(graph: NetGraph): Map<string, number> {
  const ids = graph.nodes.map((n) => n.id);
  const preds = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const e of graph.edges) if (e.delay === 0 && e.src !== e.dst) preds.get(e.dst)?.push(e.src);
  const inputs = new Set(graph.nodes.filter((n) => n.role === "input").map((n) => n.id));
  const layers = new Map<string, number>();
  const visiting = new Set<string>();
  const layerOf = (id: string): number => {
    const known = layers.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0; // a zero-delay cycle: broken here
    visiting.add(id);
    let layer = inputs.has(id) ? 0 : 1;
    for (const p of preds.get(id) ?? []) layer = Math.max(layer, layerOf(p) + 1);
    visiting.delete(id);
    layers.set(id, layer);
    return layer;
  };
  ids.forEach(layerOf);
  const last = Math.max(0, ...layers.values());
  const feeds = new Set(graph.edges.filter((e) => e.delay === 0 && e.src !== e.dst).map((e) => e.src));
  for (const n of graph.nodes)
    if ((n.role === "action" || n.role === "value") && !feeds.has(n.id)) layers.set(n.id, last);
  return layers;
}

/** The nodes of each layer, in drawing order (see the module docstring). */
function orderLayers(graph: NetGraph, layers: Map<string, number>): string[][] {
  const columns: string[][] = [];
  for (const n of graph.nodes) {
    const layer = layers.get(n.id) ?? 0;
    while (columns.length <= layer) columns.push([]);
    columns[layer]?.push(n.id);
  }
  const row = new Map<string, number>();
  columns[0]?.forEach((id, i) => row.set(id, i));
  for (const column of columns.slice(1)) {
    const centre = (id: string, fallback: number): number => {
      const rows = graph.edges
        .filter((e) => e.dst === id && e.delay === 0 && row.has(e.src) && e.src !== id)
        .map((e) => row.get(e.src) as number);
      return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : fallback;
    };
    const keyed = column.map((id, i) => ({ id, key: centre(id, i) }));
    keyed.sort((a, b) => a.key - b.key); // stable: ties keep the spec's order
    column.splice(0, column.length, ...keyed.map((k) => k.id));
    column.forEach((id, i) => row.set(id, i));
  }
  return columns;
}

const round = (v: number): number => Math.round(v * 10) / 10;

function edgeGeometry(
  src: PlacedNode,
  dst: PlacedNode,
): { shape: EdgeShape; path: string; mid: { x: number; y: number } } {
  if (src.id === dst.id) {
    // A loop above the node, leaving and entering its rim 40 degrees either side of the top.
    const a = (40 * Math.PI) / 180;
    const [dx, dy] = [src.r * Math.sin(a), src.r * Math.cos(a)];
    const top = src.y - src.r - 26;
    const path =
      `M ${round(src.x - dx)} ${round(src.y - dy)} ` +
      `C ${round(src.x - dx - 14)} ${round(top)}, ${round(src.x + dx + 14)} ${round(top)}, ` +
      `${round(src.x + dx)} ${round(src.y - dy)}`;
    return { shape: "self", path, mid: { x: src.x, y: top + 6 } };
  }
  const [vx, vy] = [dst.x - src.x, dst.y - src.y];
  const length = Math.hypot(vx, vy) || 1;
  const [ux, uy] = [vx / length, vy / length];
  const start = { x: src.x + ux * src.r, y: src.y + uy * src.r };
  const back = dst.layer <= src.layer;
  if (!back) {
    const end = { x: dst.x - ux * (dst.r + 4), y: dst.y - uy * (dst.r + 4) };
    return {
      shape: "forward",
      path: `M ${round(start.x)} ${round(start.y)} L ${round(end.x)} ${round(end.y)}`,
      mid: { x: (start.x + end.x) / 2, y: (start.y + end.y) / 2 },
    };
  }
  // A back edge bows to its right-hand side (below a right-to-left edge), so that the
  // forward edge between the same two nodes stays a straight line beside it.
  const bow = Math.min(80, 30 + length * 0.25);
  const [nx, ny] = [-uy, ux];
  const control = { x: (src.x + dst.x) / 2 + nx * bow, y: (src.y + dst.y) / 2 + ny * bow };
  const [cx, cy] = [control.x - dst.x, control.y - dst.y];
  const cl = Math.hypot(cx, cy) || 1;
  const end = { x: dst.x + (cx / cl) * (dst.r + 4), y: dst.y + (cy / cl) * (dst.r + 4) };
  const [sx, sy] = [control.x - src.x, control.y - src.y];
  const sl = Math.hypot(sx, sy) || 1;
  const from = { x: src.x + (sx / sl) * src.r, y: src.y + (sy / sl) * src.r };
  return {
    shape: "back",
    path:
      `M ${round(from.x)} ${round(from.y)} Q ${round(control.x)} ${round(control.y)} ` +
      `${round(end.x)} ${round(end.y)}`,
    // A quadratic curve's middle (t = 1/2): a quarter of each end and half the control.
    mid: {
      x: 0.25 * from.x + 0.5 * control.x + 0.25 * end.x,
      y: 0.25 * from.y + 0.5 * control.y + 0.25 * end.y,
    },
  };
}

/** Node positions and edge paths of `graph` (see the module docstring). */
export function layoutNetwork(graph: NetGraph): NetLayout {
  const layers = assignLayers(graph);
  const columns = orderLayers(graph, layers);
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const columnHeight = (column: string[]): number =>
    column.reduce((sum, id) => sum + 2 * nodeRadius(byId.get(id)?.units ?? null) + LABEL_ROOM, 0) +
    ROW_GAP * Math.max(0, column.length - 1);
  const tallest = Math.max(0, ...columns.map(columnHeight));
  const placed = new Map<string, PlacedNode>();
  columns.forEach((column, layer) => {
    let y = LOOP_ROOM + MARGIN + (tallest - columnHeight(column)) / 2;
    for (const id of column) {
      const node = byId.get(id) as NetNode;
      const r = nodeRadius(node.units);
      placed.set(id, { ...node, layer, x: MARGIN + MAX_RADIUS + layer * COLUMN_GAP, y: y + r, r });
      y += 2 * r + LABEL_ROOM + ROW_GAP;
    }
  });
  const nodes = graph.nodes.map((n) => placed.get(n.id) as PlacedNode);
  const edges = graph.edges.map((e): PlacedEdge => {
    const { shape, path, mid } = edgeGeometry(
      placed.get(e.src) as PlacedNode,
      placed.get(e.dst) as PlacedNode,
    );
    const label = e.delay > 0 ? { x: round(mid.x), y: round(mid.y), text: delayText(e.delay) } : null;
    return { ...e, shape, path, label };
  });
  return { box: boundingBox(nodes, edges), nodes, edges };
}

/** The box around every node with its labels and every point of an edge's path. */
function boundingBox(nodes: PlacedNode[], edges: PlacedEdge[]): NetLayout["box"] {
  const xs: number[] = [0];
  const ys: number[] = [0];
  for (const n of nodes) {
    xs.push(n.x - Math.max(n.r, LABEL_HALF_WIDTH), n.x + Math.max(n.r, LABEL_HALF_WIDTH));
    ys.push(n.y - n.r, n.y + n.r + LABEL_ROOM);
  }
  for (const e of edges) {
    const numbers = e.path.match(/-?\d+(\.\d+)?/g)?.map(Number) ?? [];
    numbers.forEach((v, i) => (i % 2 === 0 ? xs : ys).push(v));
    if (e.label) ys.push(e.label.y - 12, e.label.y + 12);
  }
  const [x0, y0] = [Math.min(...xs) - MARGIN, Math.min(...ys) - MARGIN];
  return {
    x: round(x0),
    y: round(y0),
    width: round(Math.max(...xs) + MARGIN - x0),
    height: round(Math.max(...ys) + MARGIN - y0),
  };
}
