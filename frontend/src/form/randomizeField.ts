/** The New Run form's domain-randomization switch (`env.randomize`): on, each training env
 * steps its own variant of the robot's model (MuJoCo Playground's randomizer for the env);
 * evaluation uses the nominal model. Only envs with a randomizer (GET /api/envs:
 * `domain_randomizer`) can have it on. */

import type { EnvInfo } from "../api/types";
import { h, uid } from "../dom";
import { sectionTarget, type ErrorTarget } from "./formTargets";

export const RANDOMIZE_PATH = "env.randomize";
const HELP =
  "Each training env steps its own variant of the robot's model (friction, masses, …: " +
  "MuJoCo Playground's randomizer for the env); evaluation uses the nominal model.";

/** Whether the switch can be changed for `env` (undefined: not listed yet, the server
 * judges), and its help line. A switch that is on stays changeable, so that it can be
 * turned off. */
export function randomizeState(env: EnvInfo | undefined, on: boolean): { disabled: boolean; help: string } {
  if (!env || env.domain_randomizer) return { disabled: false, help: HELP };
  return { disabled: !on, help: `${env.name} has no domain randomizer in MuJoCo Playground.` };
}

export interface RandomizeField {
  element: HTMLElement;
  target: ErrorTarget;
  read(): boolean;
  write(on: boolean): void;
  /** The env now picked (its listing), which decides whether the switch can be used. */
  setEnv(env: EnvInfo | undefined): void;
}

export function createRandomizeField(): RandomizeField {
  const id = uid("f-env-randomize");
  const input = h("input", {
    type: "checkbox",
    id,
    name: RANDOMIZE_PATH,
    "aria-describedby": `${id}-help ${id}-error`,
  });
  const help = h("p", { class: "field-help", id: `${id}-help` }, HELP);
  const error = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  const element = h(
    "div",
    { class: "field-wrap", "data-path": RANDOMIZE_PATH },
    h("div", { class: "field checkbox" }, input, h("label", { for: id }, "Domain randomization")),
    help,
    error,
  );
  let env: EnvInfo | undefined;
  const update = (): void => {
    const state = randomizeState(env, input.checked);
    input.disabled = state.disabled;
    help.textContent = state.help;
  };
  input.addEventListener("change", update);
  return {
    element,
    target: sectionTarget(element, error, () => input.focus(), input),
    read: () => input.checked,
    write: (on) => {
      input.checked = on;
      update();
    },
    setEnv: (picked) => {
      env = picked;
      update();
    },
  };
}
