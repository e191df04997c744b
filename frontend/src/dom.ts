/** A tiny element builder: `h("a", { href: "/", class: "x" }, "text", child)`. */

export type Child = Node | string | number | null | undefined | false | Child[];

type Listener = (event: Event) => void;

export interface Props {
  class?: string;
  /** Event listeners by event name (`click`, `input`, ...). */
  on?: Record<string, Listener>;
  /** Properties set directly on the element (`value`, `checked`, `disabled`, ...). */
  props?: Record<string, unknown>;
  [attribute: string]: unknown;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (props) {
    for (const [name, value] of Object.entries(props)) {
      if (name === "on") {
        for (const [event, listener] of Object.entries(value as Record<string, Listener>)) {
          element.addEventListener(event, listener);
        }
      } else if (name === "props") {
        Object.assign(element, value);
      } else if (name === "style") {
        // Through the CSSOM: a style attribute is an inline style, which the service's
        // Content-Security-Policy (style-src 'self') refuses.
        element.style.cssText = String(value);
      } else if (value === true) {
        element.setAttribute(name, "");
      } else if (value !== false && value !== null && value !== undefined) {
        element.setAttribute(name, String(value));
      }
    }
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/** A unique-enough id for label/input pairs. */
let nextId = 0;
export function uid(prefix: string): string {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

export function timeAgo(epochSeconds: number | null | undefined, now = Date.now() / 1000): string {
  if (!epochSeconds) return "–";
  const seconds = Math.max(0, now - epochSeconds);
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h ago`;
  return `${Math.round(seconds / 86400)} d ago`;
}

export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (n: number) => String(n).padStart(2, "0");
  return h ? `${h}:${two(m)}:${two(sec)}` : `${m}:${two(sec)}`;
}
