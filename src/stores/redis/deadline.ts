import type { Cluster, Redis } from 'ioredis';

/** Thrown when a store command has not answered by its deadline. */
export class DeadlineError extends Error {
  constructor(ms: number) {
    super(`Command timed out (no answer within ${ms} ms)`);
    this.name = 'DeadlineError';
  }
}

/**
 * Settles like `promise`, or rejects with DeadlineError after `ms`: the caller's hard bound. One timer
 * and one promise (a race and a `finally` made four more, on every rate-limited request).
 */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineError(ms)), ms);
    promise.then((value) => {
      clearTimeout(timer);
      resolve(value);
    }, (err: unknown) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

interface SettlingCommand {
  isSettled: boolean;
  promise: Promise<unknown>;
  setTimeout(ms: number): void;
}

type Sender = (command: SettlingCommand, ...rest: unknown[]) => unknown;

/**
 * ioredis times a command out per node, from when a node first gets it; a Cluster's redirection and
 * failover queues sit outside that (measured: 2.5 s stalls with a 500 ms setting). Here every command
 * gets its deadline when the client first takes it, and a node never writes a command whose caller has
 * already been told it failed: a rotation the client saw fail must not be applied later, or the
 * client's retry would look like reuse.
 */
export function enforceDeadlines(client: Redis | Cluster, ms: number): void {
  const withTimeout = client as unknown as { sendCommand: Sender };
  const send = withTimeout.sendCommand.bind(client) as Sender;
  withTimeout.sendCommand = (command, ...rest) => {
    command.setTimeout(ms);
    return send(command, ...rest);
  };
  if ('nodes' in client) client.on('+node', (node: Redis) => skipSettled(node));
  else skipSettled(client);
}

function skipSettled(node: Redis): void {
  const target = node as unknown as { sendCommand: Sender };
  const send = target.sendCommand.bind(node) as Sender;
  target.sendCommand = (command, ...rest) => (command.isSettled ? command.promise : send(command, ...rest));
}
