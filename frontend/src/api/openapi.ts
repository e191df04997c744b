/**
 * Type-level bindings to the server's OpenAPI document (`openapi.json`, generated into
 * `schema.d.ts` by `npm run gen-api`). A renamed path, a removed parameter or a changed
 * response shape on the server makes `tsc` fail here or in `client.ts`.
 */

import type { components, paths } from "./schema";

export type Schemas = components["schemas"];
export type ApiPath = keyof paths;
type Method = "get" | "post" | "patch" | "delete";

type Operation<P extends ApiPath, M extends Method> = NonNullable<paths[P][M]>;

/** The JSON body of a response `code` of `method path`. */
export type ResponseOf<P extends ApiPath, M extends Method, Code extends number = 200> =
  Operation<P, M> extends { responses: { [C in Code]: { content: { "application/json": infer T } } } }
    ? T
    : never;

/** The text body of a `text/plain` response. */
export type TextResponseOf<P extends ApiPath, M extends Method> =
  Operation<P, M> extends { responses: { 200: { content: { "text/plain": infer T } } } } ? T : never;

export type QueryOf<P extends ApiPath, M extends Method> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

export type PathParamsOf<P extends ApiPath, M extends Method> =
  Operation<P, M> extends { parameters: { path: infer A } } ? A : Record<string, never>;

export type BodyOf<P extends ApiPath, M extends Method> =
  Operation<P, M> extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;

/** `/api/runs/{run_id}` with `{run_id: "x"}` → `/api/runs/x`; the template must be a path
 * of the API, and the parameters those it declares. */
export function fillPath<P extends ApiPath, M extends Method>(
  template: P,
  _method: M,
  params: PathParamsOf<P, M>,
): string {
  return String(template).replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = (params as Record<string, string | number>)[name];
    if (value === undefined) throw new Error(`missing path parameter ${name}`);
    return encodeURIComponent(String(value));
  });
}
