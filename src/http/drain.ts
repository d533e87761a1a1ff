import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { Server as NetServer } from 'node:net';
import { shuttingDown } from './problem.js';
import type { RequestLanes } from './pipelining.js';
import type { Http2SecureServer } from 'node:http2';

/** The HTTP/2 connections of a listener, as a drain ends them (see Http2Sessions). */
export interface SessionsToDrain {
  /** GOAWAY to every HTTP/2 connection: streams in progress finish, then it closes. */
  goAwayAll(): void;
  /** Cuts every connection of the listener. */
  destroyAll(): void;
}

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
 * next answer, or Node's keep-alive timeout ends it as it always does, or the grace does. An HTTP/2
 * connection gets GOAWAY in step 3, idle or not: it names the last stream the gateway took, so the client
 * knows what to send again elsewhere (no keep-alive race).
 */
export class Drain {
  private draining = false;

  constructor(private readonly lanes: RequestLanes, private readonly sessions?: SessionsToDrain) {}

  /** True from the start of a drain. */
  get started(): boolean {
    return this.draining;
  }

  /** What `/readyz` checks: the 503 once a drain has begun, else `check`. */
  readiness(check: () => Promise<void>): () => Promise<void> {
    return () => (this.draining ? Promise.reject(shuttingDown()) : check());
  }

  /** Steps 1 and 2: not ready from now on; resolves when the pacing says so, serving as before meanwhile. */
  async begin(pacing: DrainPacing): Promise<void> {
    this.draining = true;
    await pacing.acceptUntil;
  }

  /**
   * Steps 3 and 4: resolves when every connection of `server` has ended, or was cut after graceMs.
   * Connections are told to close only once the listener is closed (and the pacing agrees): a client told
   * to reconnect must find the port closed (refused, clean), never a listener about to close, whose
   * queued connections the kernel resets.
   */
  async stopAccepting(server: Server | HttpsServer | Http2SecureServer, graceMs: number, pacing: DrainPacing): Promise<void> {
    this.draining = true;
    let ended: Promise<void> = Promise.resolve();
    if (server.listening) {
      ended = new Promise((resolve) => {
        const force = setTimeout(() => {
          // Node's HTTP/2 server has no closeAllConnections: the sessions' own list cuts them all.
          if ('closeAllConnections' in server) server.closeAllConnections();
          this.sessions?.destroyAll();
        }, graceMs);
        // net.Server's close, not http.Server's: that one also closes idle keep-alive connections at once
        // (Node >= 19), which races a client sending on them. The callback runs when the last one has ended.
        NetServer.prototype.close.call(server, () => {
          clearTimeout(force);
          resolve();
        });
      });
    }
    await pacing.listenerClosed();
    this.lanes.closeAfterResponses();
    this.sessions?.goAwayAll();
    await ended;
  }
}

/**
 * When a drain moves on. One process: after acceptGraceMs, and at once once its listener is closed. Under
 * server.workers the primary paces every worker together, since the port stays open until the last worker
 * has closed its listener (see workers.ts).
 */
export interface DrainPacing {
  /** Resolves when the listener is to close. */
  acceptUntil: Promise<void>;
  /** Called once this process's listener is closed; connections are told to close when it resolves. */
  listenerClosed(): Promise<void>;
}

export function pacedBy(acceptGraceMs: number): DrainPacing {
  return {
    acceptUntil: acceptGraceMs > 0 ? new Promise((r) => setTimeout(r, acceptGraceMs)) : Promise.resolve(),
    listenerClosed: () => Promise.resolve(),
  };
}

