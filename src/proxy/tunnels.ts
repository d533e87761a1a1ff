import type { Duplex } from 'node:stream';
import type { Clock } from '../clock.js';
import type { Principal } from '../core/principal.js';
import { destroySoon } from '../core/raw-head.js';
import type { Logger } from '../log.js';
import type { RevocationFeed } from '../stores/sessions/session-store.js';
import { CloseFrameWatch } from './close-frame.js';

/** What a tunnel registry is told: revoked session ids (the store's RevocationFeed role), and how to judge an owner again. */
export interface TunnelChecks extends RevocationFeed {
  /** Checks the owner's credential again (its authenticator's recheck): undefined while it holds, else why not. */
  recheck(owner: Principal): string | undefined | Promise<string | undefined>;
  /**
   * Why the client's connection may no longer carry anything (its client certificate was revoked or
   * expired since, whichever credential opened the tunnel); undefined while it may. Absent: it always may.
   */
  connectionRefused?(client: Duplex): string | undefined;
  /** Whether the owner may still use the route of `path` (its allow rule, the groups in force); absent: yes. */
  stillAllowed?(owner: Principal, path: string): boolean;
}

interface Tunnel {
  client: Duplex;
  upstream: Duplex;
  /** The handshake's principal: a Bearer one's session (its revocation ends the tunnel), expiry and token. */
  owner: Principal;
  /** Which side sent the first WebSocket close frame (that side closed the tunnel, whoever drops TCP first). */
  closing?: 'client' | 'upstream';
  requestId: string;
  path: string;
  upstreamName: string;
  openedAt: number;
  expiry?: NodeJS.Timeout;
  ended: boolean;
}

/** Per upstream: tunnels open, handshakes admitted whose answer has not come yet, the last refusal logged. */
interface UpstreamCount {
  open: number;
  opening: number;
  warnedAt: number;
}

/** How long a revoked session id is remembered, so a tunnel opened just after its revocation ends too. */
const RECENT_REVOCATION_MS = 60_000;
const RECENT_REVOCATIONS_MAX = 10_000;

/** The longest setTimeout delay Node keeps (about 24.8 days); a later expiry re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A refused handshake is logged at most this often per upstream (a full upstream refuses many). */
const LIMIT_WARNING_EVERY_MS = 60_000;

/**
 * The open WebSocket tunnels: bytes piped both ways between a client socket and an upstream socket,
 * nothing parsed. A tunnel ends when either side goes away (the other side is ended too), when its
 * session is revoked (heard on the revocation channel: at once), when its access token expires (a timer
 * at exp), and at the end of a shutdown's grace period. A periodic recheck (every `recheckMs`) is the
 * backstop for revocations the channel missed while it was down, and for Basic users whose password
 * changed or who were removed; a change of groups or rules rechecks at once (recheckNow), and a tunnel
 * whose owner the route's allow rule no longer lets in ends. Forced ends destroy both sockets: the tunnel does not know where the
 * frames are, so it cannot write a close frame; clients see an abnormal closure (1006).
 * A tunnel holds two sockets until one side leaves, outside the upstream's connection pool: admit()
 * bounds how many are open or opening per upstream (`upstreams.<name>.maxTunnels`).
 */
export class Tunnels {
  private readonly open = new Set<Tunnel>();
  private readonly bySid = new Map<string, Set<Tunnel>>();
  private readonly perUpstream = new Map<string, UpstreamCount>();
  /** Session ids revoked lately (heard on the channel), with when: in insertion order, oldest first. */
  private readonly recentlyRevoked = new Map<string, number>();
  private readonly unsubscribe: () => void;
  private readonly recheck: NodeJS.Timeout;
  private emptied: (() => void) | undefined;
  /** No new tunnels: the gateway is shutting down. */
  closing = false;

  /**
   * `clock` is the gateway's: when a tunnel opened, an access token's expiry, how long a revocation is
   * remembered and a refusal's warning are all read from it.
   */
  constructor(private readonly checks: TunnelChecks, private readonly log: Logger, private readonly clock: Clock, private readonly access = true, recheckMs = 5000) {
    this.unsubscribe = checks.onRevoked((sid) => {
      this.rememberRevoked(sid);
      for (const t of this.bySid.get(sid) ?? []) this.end(t, 'session revoked', true);
    });
    this.recheck = setInterval(() => void this.recheckAll(), recheckMs);
    this.recheck.unref();
  }

  get size(): number {
    return this.open.size;
  }

  /** Open tunnels per upstream that has any open or opening (the open-tunnels gauge reads it when scraped). */
  openByUpstream(): Array<[string, number]> {
    return [...this.perUpstream].map(([upstream, n]) => [upstream, n.open]);
  }

  /**
   * Takes a place for a handshake to `upstream`: false when `max` tunnels are open or opening there
   * already (the caller answers 503). A place taken is given back by settled(), once the handshake has
   * its answer, whether it became a tunnel (add(), called before settled(), counts it as open) or not.
   */
  admit(upstream: string, max: number): boolean {
    const n = this.countOf(upstream);
    if (n.open + n.opening >= max) {
      const now = this.clock.now();
      if (now - n.warnedAt >= LIMIT_WARNING_EVERY_MS) {
        n.warnedAt = now;
        this.log.warn('websocket handshake refused: the upstream has as many tunnels as it may take', { upstream, maxTunnels: max, open: n.open, opening: n.opening });
      }
      return false;
    }
    n.opening++;
    return true;
  }

  /** The handshake admitted for `upstream` has its answer (see admit). */
  settled(upstream: string): void {
    const n = this.perUpstream.get(upstream);
    if (n && n.opening > 0) n.opening--;
    this.forgetIdle(upstream, n);
  }

  private countOf(upstream: string): UpstreamCount {
    let n = this.perUpstream.get(upstream);
    if (!n) this.perUpstream.set(upstream, (n = { open: 0, opening: 0, warnedAt: 0 }));
    return n;
  }

  private forgetIdle(upstream: string, n: UpstreamCount | undefined): void {
    if (n && n.open === 0 && n.opening === 0 && this.clock.now() - n.warnedAt >= LIMIT_WARNING_EVERY_MS) this.perUpstream.delete(upstream);
  }

  /** Pipes client and upstream together until one of the ends above. */
  add(client: Duplex, upstream: Duplex, owner: Principal, info: { requestId: string; path: string; upstream: string }): void {
    const t: Tunnel = { client, upstream, owner, requestId: info.requestId, path: info.path, upstreamName: info.upstream, openedAt: this.clock.now(), ended: false };
    this.open.add(t);
    this.countOf(t.upstreamName).open++;
    if (owner.sid !== undefined) {
      let set = this.bySid.get(owner.sid);
      if (!set) this.bySid.set(owner.sid, (set = new Set()));
      set.add(t);
    }
    if (owner.expiresAt !== undefined) this.armExpiry(t, owner.expiresAt);
    for (const [from, to, side] of [[client, upstream, 'client'], [upstream, client, 'upstream']] as const) {
      const watch = new CloseFrameWatch();
      const onData = (chunk: Buffer) => {
        if (watch.sawClose(chunk)) {
          t.closing ??= side;
          from.off('data', onData);
        }
      };
      from.on('data', onData);
      from.on('error', () => this.end(t, `${side} error`, true));
      // The first side to close (its close frame, else its FIN or its socket) is the one that ended it.
      from.once('end', () => this.end(t, `${t.closing ?? side} closed`, false));
      from.on('close', () => this.end(t, `${t.closing ?? side} closed`, false));
      from.pipe(to);
    }
    this.log.debug('websocket open', { requestId: t.requestId, path: t.path, user: owner.user, via: owner.via });
    // A revocation heard while the upstream was answering the handshake found no tunnel yet: it ends
    // this one now. (The handshake's token was verified once, by authenticate; one the channel did not
    // carry is found by the periodic recheck, as for any open tunnel.) A Basic user changed meanwhile: the same.
    if (owner.sid !== undefined && this.recentlyRevoked.has(owner.sid)) this.end(t, 'session revoked', true);
  }

  private rememberRevoked(sid: string): void {
    const now = this.clock.now();
    this.recentlyRevoked.delete(sid);
    this.recentlyRevoked.set(sid, now);
    for (const [old, at] of this.recentlyRevoked) {
      if (now - at < RECENT_REVOCATION_MS && this.recentlyRevoked.size <= RECENT_REVOCATIONS_MAX) break;
      this.recentlyRevoked.delete(old);
    }
  }

  /** Ends every tunnel now (the end of a shutdown). */
  closeAll(reason = 'shutdown'): void {
    for (const t of [...this.open]) this.end(t, reason, true);
  }

  /** Resolves when no tunnel is open, or after graceMs, ending the rest. */
  async drain(graceMs: number): Promise<void> {
    this.closing = true;
    if (this.open.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => resolve(), graceMs);
        this.emptied = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.emptied = undefined;
    this.closeAll();
  }

  /** Checks every open tunnel now (the groups or the rules changed), rather than at the next round. */
  recheckNow(): void {
    void this.recheckAll();
  }

  stop(): void {
    clearInterval(this.recheck);
    this.unsubscribe();
    this.closeAll();
  }

  private armExpiry(t: Tunnel, exp: number): void {
    const delay = exp * 1000 - this.clock.now();
    if (delay <= 0) {
      // Ends on the next turn: the caller finishes setting the tunnel up first.
      t.expiry = setTimeout(() => this.end(t, 'access token expired', true), 0);
      return;
    }
    t.expiry = setTimeout(() => (delay > MAX_TIMER_MS ? this.armExpiry(t, exp) : this.end(t, 'access token expired', true)), Math.min(delay, MAX_TIMER_MS));
    t.expiry.unref();
  }

  private async recheckAll(): Promise<void> {
    for (const t of [...this.open]) await this.recheckOne(t);
  }

  private async recheckOne(t: Tunnel): Promise<void> {
    if (t.ended) return;
    const { owner } = t;
    const refused = this.checks.connectionRefused?.(t.client);
    if (refused !== undefined) {
      this.end(t, refused, true);
      return;
    }
    if (this.checks.stillAllowed && !this.checks.stillAllowed(owner, t.path)) {
      this.end(t, 'forbidden', true);
      return;
    }
    const reason = await this.checks.recheck(owner);
    if (reason !== undefined) this.end(t, reason, true);
  }

  private end(t: Tunnel, reason: string, force: boolean): void {
    if (t.ended) return;
    t.ended = true;
    clearTimeout(t.expiry);
    this.open.delete(t);
    const n = this.perUpstream.get(t.upstreamName);
    if (n) n.open--;
    this.forgetIdle(t.upstreamName, n);
    if (t.owner.sid !== undefined) {
      const set = this.bySid.get(t.owner.sid);
      set?.delete(t);
      if (set?.size === 0) this.bySid.delete(t.owner.sid);
    }
    for (const s of [t.client, t.upstream]) {
      if (force || s.destroyed) {
        s.destroy();
      } else {
        // One side left: the other gets what is in flight, then its end; never more than a second (the
        // timer goes with the close: left to run, it would hold both sockets for that second).
        s.end();
        destroySoon(s);
      }
    }
    // The access line of a tunnel, written when it ends (as a request's is after its response).
    const line = { requestId: t.requestId, path: t.path, user: t.owner.user, via: t.owner.via, reason, ms: this.clock.now() - t.openedAt };
    if (this.access) this.log.info('websocket closed', line);
    else this.log.debug('websocket closed', line);
    if (this.open.size === 0) this.emptied?.();
  }
}
