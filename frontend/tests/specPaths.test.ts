import { describe, expect, it } from "vitest";

import { errorTarget, getPath, locToPath, setPath } from "../src/form/specPaths";
import { flagNames } from "../src/form/fieldControl";

describe("spec paths", () => {
  it("maps a FastAPI loc to the field that shows the error", () => {
    const targets = [
      "config.ppo.n_envs",
      "config.ppo.n_minibatches",
      "network",
      "env.name",
      "env.overrides",
      "config.ppo",
    ];
    expect(locToPath(["body", "config", "ppo", "n_envs"])).toBe("config.ppo.n_envs");
    expect(errorTarget("config.ppo.n_envs", targets)).toBe("config.ppo.n_envs");
    // An error in a field the form has no control for goes to the nearest section.
    expect(errorTarget("config.ppo.bogus", targets)).toBe("config.ppo");
    expect(errorTarget("env.overrides.impl", targets)).toBe("env.overrides");
    // "config.ppo.n_envsX" is not inside "config.ppo.n_envs".
    expect(errorTarget("config.ppo.n_envsX", targets)).toBe("config.ppo");
    expect(errorTarget("teacher", targets)).toBe("");
  });

  it("reads and writes nested values", () => {
    const spec: Record<string, unknown> = {};
    setPath(spec, ["config", "ppo", "n_envs"], 16);
    setPath(spec, ["config", "seed"], 3);
    expect(spec).toEqual({ config: { ppo: { n_envs: 16 }, seed: 3 } });
    expect(getPath(spec, ["config", "ppo", "n_envs"])).toBe(16);
    expect(getPath(spec, ["config", "eval", "n_envs"])).toBeUndefined();
  });

  it("reads LoggingLevel in each form the server accepts", () => {
    expect(flagNames(1 | 512)).toEqual(["LOSSES", "THROUGHPUT"]);
    expect(flagNames("losses|GRAD_NORM")).toEqual(["LOSSES", "GRAD_NORM"]);
    expect(flagNames(["BASIC"])).toEqual(["LOSSES"]);
    expect(flagNames(0)).toEqual([]);
    expect(flagNames("ALL")).not.toContain("ROLLOUT_OBS");
  });
});

import { differingKeys, flatten } from "../src/flatten";

describe("config differences", () => {
  it("flattens nested specs and finds the keys that differ", () => {
    const a = flatten({ env: { name: "PointReach" }, config: { ppo: { n_envs: 16 }, seed: 1 }, tags: ["x"] });
    const b = flatten({ env: { name: "PointReach" }, config: { ppo: { n_envs: 32 } }, tags: ["x"] });
    expect(a.get("config.ppo.n_envs")).toBe("16");
    expect(a.get("tags")).toBe('["x"]');
    expect(differingKeys([a, b])).toEqual(["config.ppo.n_envs", "config.seed"]);
  });
});
