/**
 * A run spec's `network` as a drawable graph of populations and edges. Pure.
 *
 * - kind `graph`: one node per population, one edge per connection (a reciprocal
 *   connection is two edges); inputs read an observation key, outputs feed an action head
 *   or the value (`actions`, `value`).
 * - kinds `mlp` and `lstm`: the fixed actor-critic drawn in layers, observation -> hidden
 *   layers -> action and observation -> hidden layers -> value (an LSTM is a node with a
 *   delay-1 self-loop). The sizes left out are the factories' defaults (`NETWORK_FIELDS`).
 *
 * A description with mistakes still gives a graph: what cannot be drawn (an edge to an
 * unknown population, a population without a name) is left out and listed in `problems`.
 */

import { NETWORK_FIELDS } from "../form/fields";

export type NodeRole = "input" | "hidden" | "action" | "value" | "output";

export interface NetNode {
  id: string;
  role: NodeRole;
  /** Units, or null where the spec does not say (the env's observation and action sizes). */
  units: number | null;
  /** What the node reads or feeds: `obs: state`, `action: arm`, `value`, an activation. */
  note: string;
}

export interface NetEdge {
  src: string;
  dst: string;
  /** Steps late the edge is read (0: the same step). */
  delay: number;
}

export interface NetGraph {
  nodes: NetNode[];
  edges: NetEdge[];
  /** What could not be drawn, e.g. `connections[2].dst: no population "nope"`. */
  problems: string[];
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const isCount = (value: unknown): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= 1;

/** The drawable graph of a run spec's `network` (see the module docstring); null for a kind
 * that has no drawing (a plugin network) or a value that is not an object. */
export function netGraph(network: unknown): NetGraph | null {
  if (!isObject(network)) return null;
  const kind = network.kind ?? "mlp";
  if (kind === "graph") return populationGraph(network);
  if (kind === "mlp" || kind === "lstm") return actorCritic(network, kind);
  return null;
}

function sizesOf(network: Json, kind: "mlp" | "lstm", name: string): number[] {
  const given = network[name];
  if (Array.isArray(given) && given.every(isCount)) return given;
  const field = NETWORK_FIELDS[kind].find((f) => f.name === name);
  return (field?.default as number[] | undefined) ?? [];
}

function actorCritic(network: Json, kind: "mlp" | "lstm"): NetGraph {
  const activation = typeof network.activation === "string" ? network.activation : "swish";
  const nodes: NetNode[] = [];
  const edges: NetEdge[] = [];
  const input = (key: unknown): string => {
    const id = typeof key === "string" ? `obs ${key}` : "obs";
    if (!nodes.some((n) => n.id === id))
      nodes.push({
        id,
        role: "input",
        units: null,
        note: typeof key === "string" ? `obs: ${key}` : "observation",
      });
    return id;
  };
  const side = (prefix: "actor" | "critic", source: string, head: NetNode): void => {
    let previous = source;
    const chain = (node: NetNode): void => {
      nodes.push(node);
      edges.push({ src: previous, dst: node.id, delay: 0 });
      previous = node.id;
    };
    if (kind === "lstm") {
      const lstmSize = isCount(network.lstm_size) ? network.lstm_size : 64;
      chain({ id: `${prefix} lstm`, role: "hidden", units: lstmSize, note: "lstm" });
      edges.push({ src: previous, dst: previous, delay: 1 });
    }
    sizesOf(network, kind, `${prefix}_hidden_sizes`).forEach((units, i) =>
      chain({ id: `${prefix} ${i + 1}`, role: "hidden", units, note: activation }),
    );
    chain(head);
  };
  // Asymmetric (mlp with policy_obs_key and value_obs_key): each side reads its own key.
  const asymmetric = typeof network.policy_obs_key === "string" && typeof network.value_obs_key === "string";
  const actorInput = input(asymmetric ? network.policy_obs_key : null);
  const criticInput = input(asymmetric ? network.value_obs_key : null);
  side("actor", actorInput, { id: "action", role: "action", units: null, note: "action" });
  side("critic", criticInput, { id: "value", role: "value", units: 1, note: "value" });
  return { nodes, edges, problems: [] };
}

/** The outputs an action head or the value reads: output name -> its role and note. */
function outputRoles(network: Json): Map<string, { role: NodeRole; note: string }> {
  const roles = new Map<string, { role: NodeRole; note: string }>();
  const value = network.value ?? "value";
  if (typeof value === "string") roles.set(value, { role: "value", note: "value" });
  else if (isObject(value))
    for (const [stream, output] of Object.entries(value))
      if (typeof output === "string") roles.set(output, { role: "value", note: `value: ${stream}` });
  if (isObject(network.actions))
    for (const [head, output] of Object.entries(network.actions))
      if (typeof output === "string") roles.set(output, { role: "action", note: `action: ${head}` });
  return roles;
}

function populationNode(pop: Json, roles: Map<string, { role: NodeRole; note: string }>): NetNode {
  const units = isCount(pop.size) ? pop.size : null;
  const id = pop.name as string;
  if (typeof pop.input_from === "string") return { id, role: "input", units, note: `obs: ${pop.input_from}` };
  if (typeof pop.output_to === "string")
    return {
      id,
      units,
      ...(roles.get(pop.output_to) ?? { role: "output", note: `output: ${pop.output_to}` }),
    };
  const activation = typeof pop.activation === "string" ? pop.activation : "linear";
  return { id, role: "hidden", units, note: activation };
}

function populationGraph(network: Json): NetGraph {
  const problems: string[] = [];
  const nodes: NetNode[] = [];
  const roles = outputRoles(network);
  const populations = Array.isArray(network.populations) ? network.populations : [];
  if (!Array.isArray(network.populations)) problems.push("populations: a list of populations");
  populations.forEach((pop: unknown, i) => {
    if (!isObject(pop) || typeof pop.name !== "string" || pop.name === "")
      problems.push(`populations[${i}]: a population needs a name`);
    else if (nodes.some((n) => n.id === pop.name))
      problems.push(`populations[${i}].name: "${pop.name}" is named twice`);
    else nodes.push(populationNode(pop, roles));
  });
  const edges: NetEdge[] = [];
  const connections = network.connections ?? [];
  if (!Array.isArray(connections)) problems.push("connections: a list of connections");
  else
    connections.forEach((conn: unknown, i) => {
      if (!isObject(conn)) {
        problems.push(`connections[${i}]: a connection is an object {src, dst, delay}`);
        return;
      }
      const missing = (["src", "dst"] as const).filter((end) => !nodes.some((n) => n.id === conn[end]));
      missing.forEach((end) =>
        problems.push(`connections[${i}].${end}: no population ${JSON.stringify(conn[end])}`),
      );
      if (missing.length) return;
      const delay = typeof conn.delay === "number" && conn.delay >= 0 ? conn.delay : 0;
      const [src, dst] = [conn.src as string, conn.dst as string];
      edges.push({ src, dst, delay });
      if (conn.reciprocal === true && src !== dst) edges.push({ src: dst, dst: src, delay });
    });
  return { nodes, edges, problems };
}
