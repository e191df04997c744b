import { describe, expect, it } from "vitest";

import {
  PLUGIN_KWARGS_PATH,
  buildRunSpec,
  isPluginKind,
  networkKindOf,
  pluginKwargsText,
  pluginNetworkChoices,
  type RunFormInput,
} from "../src/form/runSpec";
import { runFormInput } from "./runFormInput";

const input = (extra: Partial<RunFormInput>): RunFormInput =>
  runFormInput({ env: "TwoLinkArm", network: "plugin:tiny", ...extra });

describe("a plugin network from the form", () => {
  it("is named by its kind, with the arguments typed as a JSON object", () => {
    const { spec, problems } = buildRunSpec(input({ pluginKwargs: ' {"hidden": 8, "value_sizes": [8]} ' }));
    expect(problems).toEqual([]);
    expect(spec.network).toEqual({ kind: "plugin:tiny", kwargs: { hidden: 8, value_sizes: [8] } });
    // Blank: the factory's defaults.
    expect(buildRunSpec(input({ pluginKwargs: "  " })).spec.network).toEqual({ kind: "plugin:tiny" });
  });

  it("keeps arguments that are not a JSON object from being sent, marked on them", () => {
    for (const text of ["{", "[1, 2]", "8"]) {
      const { problems } = buildRunSpec(input({ pluginKwargs: text }));
      expect(problems.map((p) => p.path)).toEqual([PLUGIN_KWARGS_PATH]);
      expect(problems[0]?.message).toMatch(/JSON object/);
    }
    // Another kind ignores them.
    expect(buildRunSpec(input({ network: "lstm", pluginKwargs: "{" })).problems).toEqual([]);
  });

  it("is told from the built-in kinds, and its arguments shown back", () => {
    expect(["plugin:tiny", "plugin:a.b-c"].every(isPluginKind)).toBe(true);
    expect(["mlp", "graph", "plugin:", "plugins:x", undefined].some(isPluginKind)).toBe(false);
    expect(pluginKwargsText({ kwargs: { hidden: 8 } })).toBe('{"hidden":8}');
    expect(pluginKwargsText({ kwargs: {} })).toBe("");
    expect(pluginKwargsText(undefined)).toBe("");
  });

  it("is offered in the kind select with its package, and a loaded spec's kind kept", () => {
    // GET /api/networks: the built-in kinds, then the installed plugins.
    const listed = [
      { kind: "mlp", source: "builtin" },
      { kind: "graph", source: "builtin" },
      { kind: "plugin:tiny", source: "plugin:tiny_pkg" },
    ];
    expect(pluginNetworkChoices(listed)).toEqual([{ kind: "plugin:tiny", label: "plugin:tiny (tiny_pkg)" }]);
    for (const kind of ["lstm", "graph", "plugin:tiny"]) expect(networkKindOf(kind)).toBe(kind);
    // No kind, or one the form does not know: an mlp, as `buildRunSpec` sends it.
    for (const kind of [undefined, "mlp", "plugin:", "transformer"]) expect(networkKindOf(kind)).toBe("mlp");
    expect(buildRunSpec(input({ network: "transformer" })).spec.network).toEqual({ kind: "mlp" });
  });
});
