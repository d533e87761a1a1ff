import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { Server as NetServer } from 'node:net';
import { HttpProblem } from './problem.js';
import type { RequestLanes } from './pipelining.js';

/**
 * Shutting down the way load balancers expect, without resetting a request:
 *  1. `/readyz` answers 503 at once (on the public and the admin listener);
 *  2. for `acceptGraceMs` everything is served as before, new connections too, while the load balancer's
 *     health checks notice and move traffic away;
 *  3. the listener closes (new connections are refused); every response from now on, and those of requests
 *     in progress, says `Connection: close`, so each keep-alive connection closes right after an answer;
 *  4. the process waits for the connections to end, at most `graceMs`, then cuts what is left.
 * An idle keep-alive connection is never closed by the drain itself: its client may be sending on it at
 * that instant (the keep-alive race), and that request would be reset. It gets `Connection: close` on its
 * next answer, or Node's keep-alive timeout ends it as it always does, or the grace does.
 */
export class Drain {
  private draining = false;

  constructor(private readonly lanes: RequestLanes) {}

  /** True from the start of a drain. */
  get started(): boolean {
    return this.draining;
  }

  /** What `/readyz` checks: the 503 once a drain has begun, else `check`. */
  readiness(check: () => Promise<void>): () => Promise<void> {
    return () => (this.draining ? Promise.reject(shuttingDown()) : check());
  }

  /** Steps 1 and 2: not ready from now on; resolves after acceptGraceMs, serving as before meanwhile. */
  async begin(acceptGraceMs: number): Promise<void> {
    this.draining = true;
    if (acceptGraceMs > 0) await new Promise((r) => setTimeout(r, acceptGraceMs));
  }

  /** Steps 3 and 4: resolves when every connection of `server` has ended, or was cut after graceMs. */
  stopAccepting(server: Server | HttpsServer, graceMs: number): Promise<void> {
    this.draining = true;
    this.lanes.closeAfterResponses();
    if (!server.listening) return Promise.resolve();
    return new Promise((resolve) => {
      const force = setTimeout(() => server.closeAllConnections(), graceMs);
      // net.Server's close, not http.Server's: that one also closes idle keep-alive connections at once
      // (Node >= 19), which races a client sending on them. The callback runs when the last one has ended.
      NetServer.prototype.close.call(server, () => {
        clearTimeout(force);
        resolve();
      });
    });
  }
}

function shuttingDown(): HttpProblem {
  return new HttpProblem(503, 'service_unavailable', 'the gateway is shutting down', { headers: { 'Retry-After': '1' } });
}
