// Minimal types for the parts of autocannon 9 the bench uses (the package ships none).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }

  export interface Result {
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    requests: Histogram;
    latency: Histogram;
    statusCodeStats: Record<string, { count: number }>;
  }

  export interface RequestSpec {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    /** Returns the request to send (a falsy value restarts the sequence). */
    setupRequest?: (request: RequestSpec, context: Record<string, unknown>) => RequestSpec | null;
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string | string[]>) => void;
  }

  /** One connection. */
  export interface Client extends EventEmitter {
    setRequests(requests: RequestSpec[]): void;
  }

  export interface Options extends RequestSpec {
    url: string;
    connections?: number;
    pipelining?: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    overallRate?: number;
    connectionRate?: number;
    requests?: RequestSpec[];
    setupClient?: (client: Client) => void;
  }

  export interface Instance extends EventEmitter {
    stop(): void;
    on(event: 'response', listener: (client: Client, statusCode: number, resBytes: number, responseTimeMs: number) => void): this;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export default function autocannon(options: Options, callback: (err: Error | null, result: Result) => void): Instance;
}
