import type { IncomingMessage, ServerResponse } from 'node:http';
import type { UpstreamConfig } from '../config/types.js';
import { HttpProblem } from '../http/problem.js';
import type { Logger } from '../log.js';
import { systemClock, type Clock } from '../clock.js';
import { Forwarder, type ForwardOptions, type ForwardOutcome, type UpstreamErrorListener } from './forward.js';
import { Http2Forwarder } from './h2-upstream.js';

/**
 * The one place an upstream's `protocol` picks the engine: HTTP/1.1 upstreams (and WebSocket tunnels)
 * go to the Forwarder, HTTP/2 ones (`h2c`, `h2`) to the Http2Forwarder. Both keep the same contract
 * (admission, timeouts, retries, header policy, Location rewrite, problem bodies), so the hand-offs see
 * one forwarder.
 */
export class Forwarders {
  private readonly http1: Forwarder;
  private readonly http2: Http2Forwarder;
  private readonly h2Names = new Set<string>();

  constructor(upstreams: Record<string, UpstreamConfig>, log: Logger, onUpstreamError?: UpstreamErrorListener, clock: Clock = systemClock) {
    const h1: Record<string, UpstreamConfig> = {};
    const h2: Record<string, UpstreamConfig> = {};
    for (const [name, u] of Object.entries(upstreams)) {
      if (u.protocol === 'h2c' || u.protocol === 'h2') {
        h2[name] = u;
        this.h2Names.add(name);
      } else {
        h1[name] = u;
      }
    }
    this.http1 = new Forwarder(h1, log, onUpstreamError, clock);
    this.http2 = new Http2Forwarder(h2, log, onUpstreamError, clock);
  }

  forward(req: IncomingMessage, res: ServerResponse, options: ForwardOptions, outcome: ForwardOutcome): Promise<void> {
    if (!this.h2Names.has(options.upstream)) return this.http1.forward(req, res, options, outcome);
    // A WebSocket over HTTP/2 would be an extended CONNECT (RFC 8441), which the gateway does not send.
    if (options.onSwitch) throw new HttpProblem(502, 'bad_gateway', `the ${options.upstream} service speaks HTTP/2: a WebSocket handshake cannot be forwarded to it`);
    return this.http2.forward(req, res, options, outcome);
  }

  /** Requests waiting for a connection (HTTP/1.1) or a stream (HTTP/2), per upstream. */
  queued(): Array<[string, number]> {
    return [...this.http1.queued().filter(([name]) => !this.h2Names.has(name)), ...this.http2.queued()];
  }

  close(): void {
    this.http1.close();
    this.http2.close();
  }

  retire(): void {
    this.http1.retire();
    this.http2.retire();
  }
}
