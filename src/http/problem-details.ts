import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** One detail of a refusal: where (`loc`), what (`msg`) and a stable machine-readable `type`. */
export interface ProblemDetail {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** Every refusal has the same JSON shape: what was wrong (`message`) and where (`details`). */
export interface ProblemBody {
  message: string;
  details: ProblemDetail[];
}

export function problem(
  c: Context,
  status: ContentfulStatusCode,
  message: string,
  details: ProblemDetail[] = [],
  headers?: Record<string, string>,
): Response {
  return c.json<ProblemBody>({ message, details }, status, headers);
}

/** The same body as text, for refusals made before a request reaches the app (see `early-refusals.ts`). */
export function problemText(message: string, details: ProblemDetail[] = []): string {
  return JSON.stringify({ message, details } satisfies ProblemBody);
}
