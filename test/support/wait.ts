/**
 * Polls `condition` until it holds; fails naming `what` when it does not within `timeoutMs`, with
 * `detail()` (what was seen by then) when given.
 */
export async function waitUntil(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
  detail?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}${detail === undefined ? '' : `\n${detail()}`}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
