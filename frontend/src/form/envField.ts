/** The environment picker, filled from GET /api/envs (polled while the server is still
 * reading the MuJoCo Playground catalogue). */

import { api } from "../api/client";
import type { EnvInfo } from "../api/types";
import { h } from "../dom";
import { simpleField, type ErrorTarget } from "./formTargets";

const POLL_MS = 3000;

export interface EnvField {
  element: HTMLElement;
  info: HTMLElement;
  target: ErrorTarget;
  value(): string;
  select(name: string): void;
  /** Loads the list; resolves after the first answer. Rejects when the call fails. */
  load(): Promise<void>;
  stop(): void;
}

export function createEnvField(): EnvField {
  const select = h("select", { name: "env.name" });
  const field = simpleField("env.name", "Environment", select, "From GET /api/envs.");
  const info = h("p", { class: "muted env-info", "aria-live": "polite" });
  let envs: EnvInfo[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;

  const describe = (): void => {
    const env = envs.find((e) => e.name === select.value);
    info.textContent = env
      ? `${env.source}: observation ${JSON.stringify(env.observation_size)}, action ${env.action_size}`
      : "";
  };
  const choose = (name: string): void => {
    if (![...select.options].some((o) => o.value === name)) select.append(h("option", { value: name }, name));
    select.value = name;
    describe();
  };
  select.addEventListener("change", describe);

  const load = async (): Promise<void> => {
    const page = await api.envs();
    if (stopped) return;
    envs = page.items;
    const chosen = select.value;
    select.replaceChildren(...envs.map((e) => h("option", { value: e.name }, e.name)));
    if (chosen) choose(chosen);
    else describe();
    if (page.complete === false) timer = setTimeout(() => void load().catch(() => {}), POLL_MS);
  };

  return {
    element: field.element,
    info,
    target: field.target,
    value: () => select.value,
    select: choose,
    load,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
