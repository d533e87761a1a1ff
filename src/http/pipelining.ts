import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * One request at a time per connection, as nginx handles HTTP/1.1 pipelining. Node's server parses
 * pipelined requests ahead and emits each while earlier responses are still pending, so one connection
 * writing thousands of requests without reading would have thousands handled (and forwarded) at once.
 * Here a request that arrives while another on its connection is in progress waits, and the connection
 * stops being read until the waiting ones are done: a pipelining client gets its answers in order, one by
 * one, at the pace of its own requests. Also knows what each connection has in progress, for a drain.
 */
export class RequestLanes {
  private readonly lanes = new Set<Lane>();
  private closing = false;

  /** The request listener that runs `handle` one request at a time per connection. */
  wrap(handle: RequestListener): RequestListener {
    return (req, res) => {
      if (this.closing) res.shouldKeepAlive = false;
      const socket = req.socket as LaneSocket;
      let lane = socket[LANE];
      if (!lane) {
        lane = { socket, current: undefined, waiting: [] };
        socket[LANE] = lane;
        this.lanes.add(lane);
        const own = lane;
        socket.once('close', () => {
          own.waiting.length = 0;
          this.lanes.delete(own);
        });
      }
      if (lane.current) {
        lane.waiting.push({ req, res });
        pause(socket);
        return;
      }
      this.run(lane, handle, req, res);
    };
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
    res.once('close', () => {
      lane.current = undefined;
      const next = lane.waiting.shift();
      if (next) {
        if (this.closing) next.res.shouldKeepAlive = false;
        this.run(lane, handle, next.req, next.res);
      } else {
        resume(lane.socket);
      }
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
}

/**
 * `_paused` is Node's own flag for "the server stopped reading this connection": with it set, Node pauses
 * its parser after the bytes at hand and reading a request body does not resume the socket behind our back.
 */
type LaneSocket = Socket & { [LANE]?: Lane; _paused?: boolean; parser?: { pause(): void; resume(): void } | null };

function pause(socket: LaneSocket): void {
  if (socket._paused) return;
  socket._paused = true;
  socket.pause();
}

function resume(socket: LaneSocket): void {
  if (!socket._paused || socket.destroyed) return;
  socket._paused = false;
  socket.parser?.resume();
  socket.resume();
}
