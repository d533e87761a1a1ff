/**
 * The one way tests wait for something that happens on its own time (a message on another instance, a
 * process that starts, a log line): poll a check until it holds. Never a fixed sleep to show that
 * something happened, and never an assertion on how soon a loaded machine gets there: the timeout is
 * the longest a test waits before it calls the thing missing.
 */

/** Polls `check` every `everyMs` until it holds: true, or false once `timeoutMs` has passed. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 3000, everyMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Polls `check` until it holds and returns how long that took (ms); throws once `timeoutMs` has passed. */
export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs = 5000, everyMs = 10): Promise<number> {
  const started = performance.now();
  if (await eventually(check, timeoutMs, everyMs)) return performance.now() - started;
  throw new Error(`condition not met within ${timeoutMs} ms`);
}
