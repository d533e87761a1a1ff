import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * One request at a time per connection, as nginx handles HTTP/1.1 pipelining. Node's server parses
 * pipelined requests ahead and emits each while earlier responses are still pending, so one connection
 * writing thousands of requests without reading would have thousands handled (and forwarded) at once.
 * Here a request that arrives while another on its connection is in progress waits, and the connection
 * stops being read until the waiting ones are done: a pipelining client gets its answers in order, one by
 * one, at the pace of its own requests. Node still parses up to 64 KiB ahead (some 1,700 short requests),
 * so past `maxWaiting` requests waiting on one connection it closes after the answer in progress, and the
 * client resends what was not answered (RFC 9112 §9.3.2), as nginx does after `keepalive_requests`: 20 such
 * connections would otherwise keep ~35,000 parsed requests alive and the heap growing by hundreds of MB.
 * Also knows what each connection has in progress, for a drain.
 */
export class RequestLanes {
  private readonly lanes = new Set<Lane>();
  private closing = false;

  /**
   * `maxWaiting`: server.maxPipelinedRequests; a reload changes it for the requests parsed from then on.
   * `onOverflow`: told once per connection that is ended for having too many requests waiting.
   */
  constructor(public maxWaiting: number, private readonly onOverflow: (socket: Socket) => void = () => {}) {}

  /** The request listener that runs `handle` one request at a time per connection. */
  wrap(handle: RequestListener): RequestListener {
    return (req, res) => {
      if (this.closing) res.shouldKeepAlive = false;
      const socket = req.socket as LaneSocket;
      const lane = socket[LANE] ?? this.open(socket);
      // Parsed after an answer that ended the connection: nobody will read its answer.
      if (lane.ended) return;
      if (lane.current) {
        if (lane.waiting.length >= this.maxWaiting) {
          endAfterCurrent(lane);
          this.onOverflow(socket);
          return;
        }
        lane.waiting.push({ req, res });
        hold(lane);
        return;
      }
      this.run(lane, handle, req, res);
    };
  }

  private open(socket: LaneSocket): Lane {
    const lane: Lane = { socket, current: undefined, waiting: [], held: false, ended: false, guarded: false };
    socket[LANE] = lane;
    this.lanes.add(lane);
    socket.once('close', () => {
      lane.waiting.length = 0;
      this.lanes.delete(lane);
    });
    return lane;
  }

  /**
   * From now on every response says `Connection: close` (and its connection closes after it), including
   * those of requests in progress whose headers are not out yet. Idle connections are left alone: one
   * closed just as its client sends on it would reset that request.
   */
  closeAfterResponses(): void {
    this.closing = true;
    for (const lane of this.lanes) {
      for (const res of [lane.current, ...lane.waiting.map((w) => w.res)]) {
        if (res && !res.headersSent) res.shouldKeepAlive = false;
      }
    }
  }

  private run(lane: Lane, handle: RequestListener, req: IncomingMessage, res: ServerResponse): void {
    lane.current = res;
    // 'close' comes once the response is done (after 'finish') or its connection is gone.
    res.on('close', () => {
      // An answer that ended its connection (Connection: close, or the client is gone): Node gives the
      // requests it parsed behind it no connection to answer on, so none of them may run.
      if (lane.ended || !res.shouldKeepAlive || lane.socket.destroyed || !lane.socket.writable) {
        lane.ended = true;
        lane.waiting.length = 0;
        lane.current = undefined;
        // Ended for too many requests waiting after its head was out: the connection goes once it is written.
        if (!lane.socket.destroyed) lane.socket.destroySoon();
        return;
      }
      if (lane.waiting.length === 0) {
        lane.current = undefined;
        release(lane);
        return;
      }
      // The next one after the event loop has polled for I/O: a connection with thousands of requests
      // queued takes its turn beside the others (one request per loop turn), never ahead of them.
      setImmediate(() => {
        lane.current = undefined;
        const next = lane.waiting.shift();
        if (!next) return release(lane);
        if (lane.socket.destroyed) {
          lane.waiting.length = 0;
          return;
        }
        if (this.closing) next.res.shouldKeepAlive = false;
        this.run(lane, handle, next.req, next.res);
      });
    });
    handle(req, res);
  }
}

const LANE = Symbol('requestLane');

interface Lane {
  socket: LaneSocket;
  /** The response in progress on this connection. */
  current: ServerResponse | undefined;
  /** Requests Node parsed ahead, in order. */
  waiting: Array<{ req: IncomingMessage; res: ServerResponse }>;
  /** The connection is not read until the lane is idle again. */
  held: boolean;
  /** An answer ended the connection: what Node parses behind it is never handled. */
  ended: boolean;
  /** `_paused` is guarded (see guard). */
  guarded: boolean;
}

type LaneSocket = Socket & { [LANE]?: Lane; _paused?: boolean; parser?: { pause(): void; resume(): void } | null };

/** Stops reading: Node pauses its parser after the bytes at hand (it sees `_paused`). */
function hold(lane: Lane): void {
  if (lane.held) return;
  if (!lane.guarded) guard(lane);
  lane.held = true;
  lane.socket.pause();
}

/**
 * Node's own flag for "this connection is not read now": Node sets and clears it for its write
 * back-pressure (and clears it on every write that leaves little buffered); while requests wait here it
 * reads true whatever Node set, so neither Node nor a request body being read resumes the socket.
 * Installed on a connection the first time it pipelines, never before: an accessor of its own gives the
 * socket an object shape no other socket has, and every property read of Node's HTTP code on it then
 * goes through a slow generic lookup (measured: about a seventh of the gateway's CPU per request when
 * every connection had one).
 */
function guard(lane: Lane): void {
  lane.guarded = true;
  const socket = lane.socket;
  let own = socket._paused === true;
  Object.defineProperty(socket, '_paused', {
    configurable: true,
    get: () => own || lane.held,
    set: (value: boolean) => {
      own = value;
    },
  });
}

/**
 * Too many requests wait on this connection: none of them runs, and the connection closes after the answer
 * in progress (with `Connection: close` when its head is not out yet).
 */
function endAfterCurrent(lane: Lane): void {
  lane.ended = true;
  lane.waiting.length = 0;
  if (lane.current && !lane.current.headersSent) lane.current.shouldKeepAlive = false;
}

/** Reads again once nothing is in progress or waiting (unless Node holds it for its own reasons). */
function release(lane: Lane): void {
  if (!lane.held) return;
  lane.held = false;
  const socket = lane.socket;
  if (socket.destroyed || socket._paused) return;
  socket.parser?.resume();
  socket.resume();
}
