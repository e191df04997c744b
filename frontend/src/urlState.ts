/**
 * View state kept in the URL's query, so that a view can be shared and survives a reload:
 * the runs list's filters and the compare view's runs, metric and chart settings. Parsing
 * is forgiving (unknown or malformed values fall back to the defaults); serializing leaves
 * defaults out and always writes keys in the same order.
 */

import type { ViewSettings } from "./charts/plotData";
import { RUN_STATUSES } from "./api/types";

export const FILTER_KEYS = ["q", "status", "kind", "tag"] as const;
export type FilterKey = (typeof FILTER_KEYS)[number];
export type ListFilters = Record<FilterKey, string>;

export function emptyFilters(): ListFilters {
  return { q: "", status: "", kind: "", tag: "" };
}

export function filtersFromQuery(query: URLSearchParams): ListFilters {
  const filters = emptyFilters();
  for (const key of FILTER_KEYS) filters[key] = (query.get(key) ?? "").trim();
  if (!(RUN_STATUSES as readonly string[]).includes(filters.status)) filters.status = "";
  if (!["ppo", "distillation"].includes(filters.kind)) filters.kind = "";
  return filters;
}

export function filtersToQuery(filters: ListFilters): string {
  const params = new URLSearchParams();
  for (const key of FILTER_KEYS) if (filters[key]) params.set(key, filters[key]);
  return params.toString();
}

export function hasFilters(filters: ListFilters): boolean {
  return FILTER_KEYS.some((key) => filters[key] !== "");
}

export interface CompareState extends ViewSettings {
  ids: string[];
  metric: string;
}

const MAX_SMOOTHING = 0.99;

export function compareFromQuery(query: URLSearchParams): CompareState {
  const ids = (query.get("ids") ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const smoothing = Number(query.get("smoothing") ?? "0");
  return {
    ids: [...new Set(ids)],
    metric: query.get("metric") ?? "",
    xAxis: query.get("x") === "wall" ? "wall" : "step",
    smoothing: Number.isFinite(smoothing) ? Math.min(MAX_SMOOTHING, Math.max(0, smoothing)) : 0,
    logScale: query.get("log") === "1",
  };
}

export function compareToQuery(state: CompareState): string {
  const params = new URLSearchParams();
  if (state.ids.length) params.set("ids", state.ids.join(","));
  if (state.metric) params.set("metric", state.metric);
  if (state.xAxis === "wall") params.set("x", "wall");
  if (state.smoothing > 0) params.set("smoothing", String(state.smoothing));
  if (state.logScale) params.set("log", "1");
  return params.toString().replace(/%2C/g, ",");
}
