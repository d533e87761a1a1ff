import { Agent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { parse as parseUrl, type Url } from 'node:url';
import type { UpstreamConfig } from '../config/types.js';
import { DomainError } from '../core/domain-error.js';
import type { Logger } from '../log.js';
import { upstreamCa } from './trust.js';

/** Below Node's default server keep-alive timeout (5 s), so a pooled socket is never reused as the upstream closes it. */
const AGENT_IDLE_MS = 4000;

/** What each request to a target is sent with, worked out once per target. */
interface TargetRequest {
  /** `http:` or `https:`. */
  readonly protocol: string;
  /** The name or address to connect to (an IPv6 address without brackets). */
  readonly hostname: string;
  readonly port: number;
  /** The Host header the target gets unless its upstream preserves the client's: `host[:port]` as the URL spells it. */
  readonly host: string;
}

function targetRequest(url: string): TargetRequest {
  const u: Url = parseUrl(url);
  const https = u.protocol === 'https:';
  return { protocol: u.protocol!, hostname: u.hostname!, port: Number(u.port) || (https ? 443 : 80), host: u.host! };
}

/** Asks a target whether it is healthy: calls `settle` once, with the answer (no answer within timeoutMs: false). */
export type HealthProbe = (target: Target, timeoutMs: number, settle: (healthy: boolean) => void) => void;

/** One server of an upstream. */
export interface Target {
  url: string;
  /** How every request to it is sent, worked out once (see TargetRequest). */
  request: TargetRequest;
  /** `scheme://host:port`, as it would appear in the target's own absolute redirects. */
  origin: string;
  /** The URL's own path, without a trailing slash. */
  basePath: string;
  agent: Agent;
  /** Requests forwarded to it and not finished (on a connection or waiting for one). */
  inFlight: number;
  /** Refused a connection: skipped until then (passive health). */
  downUntil: number;
  /** The last active health check failed. */
  unhealthy: boolean;
}

/**
 * The targets of one upstream and how a request picks one: round-robin or fewest requests in flight,
 * among those neither cooling down after a refused connection nor failing their health check. When every
 * target is out, the one whose cool-down ends first is tried anyway: a guess beats a certain 502.
 * Admission: each target has at most `maxConnections` connections (its agent's maxSockets) and
 * `maxQueued` requests waiting for one; a target with both full takes no more, and when no target can
 * take a request, pick() says so (the caller answers 503, see busy()).
 */
export class UpstreamPool {
  readonly targets: Target[];
  /** Every target's origin (a redirect to any of them is a redirect to this upstream). */
  readonly origins: string[];
  private next = 0;
  /** Requests a target may hold: in use plus waiting for a connection. */
  private readonly limit: number;
  private readonly checker: NodeJS.Timeout | undefined;
  /** The CAs of `https:` targets (see upstreamCa); undefined: Node's. */
  readonly ca: string[] | undefined;

  /**
   * `probe`: how a health check asks a target (an HTTP/2 upstream's own, see h2-upstream); without it,
   * `GET path` over HTTP/1.1.
   */
  constructor(readonly name: string, private readonly config: UpstreamConfig, private readonly log: Logger, private readonly probe?: HealthProbe) {
    this.limit = config.maxConnections + config.maxQueued;
    const ca = upstreamCa(config.caFile);
    this.ca = ca;
    this.targets = config.targets.map((url) => {
      const options = { keepAlive: true, timeout: AGENT_IDLE_MS, scheduling: 'lifo' as const, maxSockets: config.maxConnections, ...(ca ? { ca } : {}) };
      const u = new URL(url);
      return {
        url,
        request: targetRequest(url),
        origin: u.origin,
        basePath: u.pathname.replace(/\/+$/, ''),
        agent: url.startsWith('https:') ? new HttpsAgent(options) : new Agent(options),
        inFlight: 0,
        downUntil: 0,
        unhealthy: false,
      };
    });
    this.origins = [...new Set(this.targets.map((t) => t.origin))];
    const check = config.healthCheck;
    if (check) {
      this.checker = setInterval(() => this.checkAll(), check.intervalMs);
      this.checker.unref();
      this.checkAll();
    }
  }

  /**
   * A target for the next request, other than `not` (the one that just failed) when there is another;
   * undefined when every target is at its limit (maxConnections in use and maxQueued waiting).
   * No array is made per request.
   */
  pick(now: number, not?: Target): Target | undefined {
    const targets = this.targets;
    const limit = this.limit;
    // The common case, one target.
    if (targets.length === 1) return targets[0]!.inFlight < limit ? targets[0] : undefined;
    const usableTarget = (t: Target) => t !== not && t.inFlight < limit && !t.unhealthy && t.downUntil <= now;
    let usable = 0;
    for (const t of targets) if (usableTarget(t)) usable++;
    if (usable === 0) {
      // Every target with room is out: the one whose cool-down ends first (not the one that just failed, if another).
      let best: Target | undefined;
      for (const t of targets) if (t !== not && t.inFlight < limit && (!best || t.downUntil < best.downUntil)) best = t;
      return best ?? (not && not.inFlight < limit ? not : undefined);
    }
    const start = this.next++ % usable;
    let seen = 0;
    let chosen: Target | undefined;
    for (const t of targets) {
      if (!usableTarget(t)) continue;
      if (seen++ === start) {
        chosen = t;
        break;
      }
    }
    if (this.config.balance !== 'least-requests' || usable === 1) return chosen!;
    // Fewest in flight; ties go round-robin (from the round-robin pick on), so an idle pool still spreads.
    const from = targets.indexOf(chosen!);
    let best = chosen!;
    for (let k = 1; k < targets.length; k++) {
      const t = targets[(from + k) % targets.length]!;
      if (usableTarget(t) && t.inFlight < best.inFlight) best = t;
    }
    return best;
  }

  /** Requests waiting for a connection (every target's agent at maxSockets), across the targets. */
  queued(): number {
    let n = 0;
    for (const t of this.targets) {
      for (const waiting of Object.values(t.agent.requests)) n += waiting?.length ?? 0;
    }
    return n;
  }

  /** The answer when pick() found no target with room: 503, retry shortly. */
  busy(): DomainError {
    const { maxConnections, maxQueued } = this.config;
    return new DomainError('upstream_busy', `the ${this.name} service has as many requests as it may take (${maxConnections + maxQueued} per target); retry shortly`, {
      retryAfterSeconds: 1,
    });
  }

  /** The target refused (or did not accept) a connection: out of rotation for the cool-down. */
  markDown(target: Target, now: number): void {
    if (target.downUntil <= now) {
      this.log.warn('upstream target down; skipping it for the cool-down', { upstream: this.name, target: target.origin, cooldownMs: this.config.cooldownMs });
    }
    target.downUntil = now + this.config.cooldownMs;
  }

  close(): void {
    clearInterval(this.checker);
    for (const t of this.targets) t.agent.destroy();
  }

  private checkAll(): void {
    const check = this.config.healthCheck!;
    for (const target of this.targets) {
      // Under the target's own path: `/healthz` of `http://10.0.0.1:9001/base` is `/base/healthz`.
      const url = new URL(`${target.origin}${target.basePath}${check.path}`);
      const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
      let settled = false;
      const settle = (healthy: boolean) => {
        if (settled) return;
        settled = true;
        if (healthy === target.unhealthy) {
          this.log.warn(healthy ? 'upstream target healthy again' : 'upstream target failed its health check', { upstream: this.name, target: target.origin });
        }
        target.unhealthy = !healthy;
        if (healthy) target.downUntil = 0;
      };
      if (this.probe) {
        this.probe(target, check.timeoutMs, settle);
        continue;
      }
      const ca = this.ca;
      const req = request(url, { method: 'GET', timeout: check.timeoutMs, agent: false, ...(ca ? { ca } : {}) }, (res) => {
        res.resume();
        settle(res.statusCode! >= 200 && res.statusCode! < 400);
      });
      req.on('timeout', () => req.destroy(new Error('health check timed out')));
      req.on('error', () => settle(false));
      req.end();
    }
  }
}
