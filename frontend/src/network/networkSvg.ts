/**
 * A network drawn as SVG (no library): a `<figure>` with the drawing of `layoutNetwork`, a
 * caption that counts populations and connections, a legend of the node roles, and what
 * could not be drawn. Used on the run page (beside the config) and in the New Run form's
 * preview of a graph.
 */

import { h } from "../dom";
import { layoutNetwork, type PlacedEdge, type PlacedNode } from "./layout";
import { netGraph, type NetGraph, type NodeRole } from "./netGraph";

const SVG = "http://www.w3.org/2000/svg";

function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | number>,
  ...children: (SVGElement | string)[]
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  element.append(...children);
  return element;
}

const ROLE_LABELS: Record<NodeRole, string> = {
  input: "input (reads an observation key)",
  hidden: "population",
  action: "action head",
  value: "value",
  output: "other output",
};

let drawings = 0;

function edgeElement(edge: PlacedEdge, arrow: string): SVGGElement {
  const delayed = edge.delay > 0;
  const title = `${edge.src} → ${edge.dst}${delayed ? `, ${edge.delay} step${edge.delay === 1 ? "" : "s"} late` : ""}`;
  return s(
    "g",
    {
      class: `edge edge-${edge.shape}${delayed ? " delayed" : ""}`,
      "data-src": edge.src,
      "data-dst": edge.dst,
    },
    s("title", {}, title),
    s("path", { d: edge.path, "marker-end": `url(#${arrow})` }),
    ...(edge.label
      ? [s("text", { class: "delay-label", x: edge.label.x, y: edge.label.y }, edge.label.text)]
      : []),
  );
}

function nodeElement(node: PlacedNode): SVGGElement {
  const units = node.units === null ? "" : `${node.units} · `;
  return s(
    "g",
    { class: `node node-${node.role}`, "data-name": node.id, "data-role": node.role },
    s("title", {}, `${node.id}: ${node.units ?? "?"} units, ${node.note}`),
    s("circle", { cx: node.x, cy: node.y, r: Math.round(node.r * 10) / 10 }),
    s("text", { class: "node-name", x: node.x, y: node.y + node.r + 14 }, node.id),
    s("text", { class: "node-note", x: node.x, y: node.y + node.r + 28 }, `${units}${node.note}`),
  );
}

/** The SVG drawing of `graph`. */
export function networkSvg(graph: NetGraph): SVGSVGElement {
  const layout = layoutNetwork(graph);
  const arrow = `net-arrow-${++drawings}`;
  const { x, y, width, height } = layout.box;
  const delayed = graph.edges.filter((e) => e.delay > 0).length;
  return s(
    "svg",
    {
      class: "network-svg",
      viewBox: `${x} ${y} ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": `Network: ${graph.nodes.length} populations, ${graph.edges.length} connections, ${delayed} delayed`,
    },
    s(
      "defs",
      {},
      s(
        "marker",
        {
          id: arrow,
          viewBox: "0 0 10 10",
          refX: 8,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: "auto-start-reverse",
        },
        s("path", { class: "arrow-head", d: "M 0 0 L 10 5 L 0 10 z" }),
      ),
    ),
    s("g", { class: "edges" }, ...layout.edges.map((e) => edgeElement(e, arrow))),
    s("g", { class: "nodes" }, ...layout.nodes.map(nodeElement)),
  );
}

/** The caption's counts, e.g. "5 populations, 5 connections (1 delayed)". */
export function networkSummary(graph: NetGraph): string {
  const delayed = graph.edges.filter((e) => e.delay > 0).length;
  const n = graph.nodes.length;
  const m = graph.edges.length;
  return (
    `${n} population${n === 1 ? "" : "s"}, ${m} connection${m === 1 ? "" : "s"}` +
    (delayed ? ` (${delayed} delayed)` : "")
  );
}

/** The run spec's `network` drawn in a figure; a note instead where it has no drawing. */
export function networkFigure(network: unknown): HTMLElement {
  const graph = netGraph(network);
  if (!graph)
    return h(
      "figure",
      { class: "network-figure empty" },
      h("figcaption", { class: "muted" }, "No drawing for this network kind."),
    );
  const roles = [...new Set(graph.nodes.map((n) => n.role))];
  return h(
    "figure",
    { class: "network-figure" },
    h("div", { class: "network-scroll" }, networkSvg(graph)),
    h(
      "figcaption",
      null,
      h("span", { class: "network-summary" }, networkSummary(graph)),
      h(
        "span",
        { class: "network-legend" },
        roles.map((role) => h("span", { class: `legend-item node-${role}` }, ROLE_LABELS[role])),
        graph.edges.some((e) => e.delay > 0)
          ? h("span", { class: "legend-item delayed" }, "d=k: k steps late")
          : null,
      ),
    ),
    graph.problems.length
      ? h(
          "ul",
          { class: "network-problems" },
          graph.problems.map((p) => h("li", null, `Not drawn: ${p}`)),
        )
      : null,
  );
}
