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
  /** Called when the user picks another env (not on `select`). */
  onPick(listener: (name: string) => void): void;
  /** Called with the shown env's listing (undefined while not listed) whenever it may have
   * changed: a pick, a `select`, each load of the list. */
  onInfo(listener: (env: EnvInfo | undefined) => void): void;
  /** Loads the list; resolves after the first answer. Rejects when the call fails. */
  load(): Promise<void>;
  stop(): void;
}

/** One line about an env: its sizes (or that they are still being learned), or why it
 * cannot be trained here. */
export function envSummary(env: EnvInfo): string {
  if (env.available === false) return `not available: ${env.reason ?? "unknown reason"}`;
  if (env.details_known === false) return `${env.source}: sizes not known yet (the service is loading it)`;
  return `${env.source}: observation ${JSON.stringify(env.observation_size)}, action ${env.action_size}`;
}

function envOption(env: EnvInfo): HTMLOptionElement {
  if (env.available !== false) return h("option", { value: env.name }, env.name);
  // Greyed out with the reason: such a run would be refused on env.name.
  return h(
    "option",
    { value: env.name, disabled: "", title: env.reason ?? "" },
    `${env.name} (not available)`,
  );
}

export function createEnvField(): EnvField {
  const select = h("select", { name: "env.name" });
  const field = simpleField("env.name", "Environment", select, "From GET /api/envs.");
  const info = h("p", { class: "muted env-info", "aria-live": "polite" });
  let envs: EnvInfo[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let lastValue = "";
  const listeners: ((name: string) => void)[] = [];
  const infoListeners: ((env: EnvInfo | undefined) => void)[] = [];

  const describe = (): void => {
    const env = envs.find((e) => e.name === select.value);
    info.textContent = env ? envSummary(env) : "";
    infoListeners.forEach((listener) => listener(env));
  };
  const choose = (name: string): void => {
    if (![...select.options].some((o) => o.value === name)) select.append(h("option", { value: name }, name));
    select.value = name;
    lastValue = name;
    describe();
  };
  select.addEventListener("change", () => {
    describe();
    if (select.value === lastValue) return;
    lastValue = select.value;
    listeners.forEach((listener) => listener(select.value));
  });

  const load = async (): Promise<void> => {
    const page = await api.envs();
    if (stopped) return;
    envs = page.items;
    const chosen = select.value;
    select.replaceChildren(...envs.map(envOption));
    if (chosen) choose(chosen);
    else {
      lastValue = select.value;
      describe();
    }
    if (page.complete === false) timer = setTimeout(() => void load().catch(() => {}), POLL_MS);
  };

  return {
    element: field.element,
    info,
    target: field.target,
    value: () => select.value,
    select: choose,
    onPick: (listener) => listeners.push(listener),
    onInfo: (listener) => infoListeners.push(listener),
    load,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
