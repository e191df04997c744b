/**
 * History-API routing: the server answers every non-/api path with index.html, so
 * `/runs/<id>` and friends can be opened directly and reloaded.
 */

export interface RouteContext {
  params: Record<string, string>;
  query: URLSearchParams;
}

/** A view renders into `main` and returns what to do when the user leaves it. */
export type View = (main: HTMLElement, context: RouteContext) => (() => void) | void;

interface Route {
  pattern: RegExp;
  names: string[];
  view: View;
}

export class Router {
  private readonly routes: Route[] = [];
  private leaveCurrent: (() => void) | void = undefined;

  constructor(
    private readonly main: HTMLElement,
    private readonly notFound: View,
  ) {}

  /** `path` like `/runs/:id`. */
  add(path: string, view: View): this {
    const names: string[] = [];
    const source = path.replace(/:(\w+)/g, (_, name: string) => {
      names.push(name);
      return "([^/]+)";
    });
    this.routes.push({ pattern: new RegExp(`^${source}/?$`), names, view });
    return this;
  }

  start(): void {
    window.addEventListener("popstate", () => this.render());
    document.addEventListener("click", (event) => this.interceptLink(event));
    this.render();
  }

  navigate(url: string, replace = false): void {
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    this.render();
  }

  /** Leaves the current view (stops its streams and timers) and empties the page. */
  leave(): void {
    this.leaveCurrent?.();
    this.leaveCurrent = undefined;
    this.main.replaceChildren();
  }

  /** Renders the view of the current URL. */
  render(): void {
    this.leave();
    const { pathname, search } = window.location;
    const query = new URLSearchParams(search);
    for (const route of this.routes) {
      const match = route.pattern.exec(pathname);
      if (!match) continue;
      const params = Object.fromEntries(
        route.names.map((name, i) => [name, decodeURIComponent(match[i + 1] ?? "")]),
      );
      this.leaveCurrent = route.view(this.main, { params, query });
      this.markCurrentNav(pathname);
      return;
    }
    this.leaveCurrent = this.notFound(this.main, { params: {}, query });
  }

  private markCurrentNav(pathname: string): void {
    document.querySelectorAll<HTMLAnchorElement>("header nav a").forEach((a) => {
      if (a.pathname === pathname) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    });
  }

  private interceptLink(event: MouseEvent): void {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const anchor = (event.target as Element | null)?.closest?.("a");
    if (!anchor || anchor.target || anchor.hasAttribute("download")) return;
    if (anchor.origin !== window.location.origin || anchor.pathname.startsWith("/api/")) return;
    event.preventDefault();
    this.navigate(anchor.pathname + anchor.search + anchor.hash);
  }
}
