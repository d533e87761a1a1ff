import { pino, type DestinationStream } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /**
   * A line of flat fields (strings, numbers, booleans; undefined ones left out), the access log's:
   * serialized here in one pass instead of pino's generic serializer and the redaction walk, which
   * cost a busy gateway more than the rest of the line's work. A field whose name says it holds a
   * credential is still never written. Loggers without it take `info` or `debug`; see `logPlain`.
   */
  plain?(level: PlainLevel, msg: string, fields: PlainFields): void;
  /** Resolves when every line logged so far has been written (call before process.exit). */
  flush?(): Promise<void>;
}

export type PlainLevel = 'debug' | 'info';
export type PlainFields = Record<string, string | number | boolean | undefined>;

/** Writes `fields` through the logger's `plain` when it has one, else as any other line. */
export function logPlain(log: Logger, level: PlainLevel, msg: string, fields: PlainFields): void {
  if (log.plain) log.plain(level, msg, fields);
  else log[level](msg, fields);
}

/** The trace fields of the line being written: the active span's ids, while tracing is on. */
export type TraceFields = () => { trace_id: string; span_id: string } | undefined;
let traceFields: TraceFields | undefined;

/**
 * Lines logged from then on carry `trace_id` and `span_id` of the span active where they are logged
 * (src/tracing sets it when tracing is on; off, no line looks for a span).
 */
export function useTraceFields(fields: TraceFields): void {
  traceFields = fields;
}

/** pino's mixin: the trace fields, when tracing is on and a span is active. */
function traceMixin(): object {
  return traceFields?.() ?? {};
}

/** A field whose name says it holds a credential is never written, at any depth. */
const SECRET_NAME = /authorization|password|passwd|secret|token|cookie|api[-_]?key|credential/i;
export const REDACTED = '[redacted]';
/** How long an exit waits for the log to drain before it goes anyway. */
const FLUSH_TIMEOUT_MS = 2000;
/**
 * How long a line may wait for others to go out with it, and the most bytes (UTF-8) a batch holds (a line
 * that would take it past goes in the next): SonicBoom's largest write (its maxWrite), so writes are no
 * larger than before the batches. Workers share stdout, and a pipe keeps only small writes whole.
 */
const BATCH_MS = 20;
const BATCH_BYTES = 16 * 1024;

/**
 * pino, one JSON object a line: `{"level":"info","time":"<ISO>",...fields,"msg":"..."}`, every level on
 * stdout through an asynchronous destination (one ordered stream: a collector that reads stdout and
 * stderr separately cannot reorder a warning against the lines around it). `write` replaces the
 * destination (tests capture lines with it); `isError` is true for warn and error lines.
 */
export function createLogger(level: LogLevel, write?: (line: string, isError: boolean) => void): Logger {
  if (level === 'silent') return silentLogger;
  const destination = write ? lineSink(write) : batched(pino.destination({ dest: 1, sync: false }));
  const logger = pino({
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }), log: redact },
    mixin: traceMixin,
  }, destination);
  return {
    debug: (msg, fields) => logger.debug(fields ?? {}, msg),
    info: (msg, fields) => logger.info(fields ?? {}, msg),
    warn: (msg, fields) => logger.warn(fields ?? {}, msg),
    error: (msg, fields) => logger.error(fields ?? {}, msg),
    plain: (lineLevel, msg, fields) => {
      if (logger.isLevelEnabled(lineLevel)) destination.write(plainLine(lineLevel, msg, fields));
    },
    flush: () => flush(logger),
  };
}

/** The line pino would write for these fields: `{"level":…,"time":…,…fields,"msg":…}` and a newline. */
function plainLine(level: PlainLevel, msg: string, fields: PlainFields): string {
  let line = `{"level":"${level}","time":"${isoNow()}"`;
  for (const name in fields) {
    const value = fields[name];
    if (value === undefined) continue;
    line += `,"${name}":`;
    if (isSecretName(name)) line += `"${REDACTED}"`;
    else if (typeof value === 'string') line += jsonString(value);
    else if (typeof value === 'number') line += Number.isFinite(value) ? String(value) : 'null';
    else line += value ? 'true' : 'false';
  }
  return `${line},"msg":${jsonString(msg)}}\n`;
}

/** What JSON.stringify escapes in a string: control characters, `"`, `\\` and (lone) surrogates. */
// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** JSON.stringify of a string; one with nothing to escape (nearly every field value) is only quoted. */
function jsonString(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
}

/** Field names are few and repeat on every line: each is tested against SECRET_NAME once. */
const secretNames = new Map<string, boolean>();
function isSecretName(name: string): boolean {
  let secret = secretNames.get(name);
  if (secret === undefined) {
    secret = SECRET_NAME.test(name);
    if (secretNames.size < 1000) secretNames.set(name, secret);
  }
  return secret;
}

/** `new Date().toISOString()`, made once per millisecond. */
let isoAt = 0;
let isoText = '';
function isoNow(): string {
  const now = Date.now();
  if (now !== isoAt) {
    isoAt = now;
    isoText = new Date(now).toISOString();
  }
  return isoText;
}

const noop = () => {};
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop, flush: () => Promise.resolve() };

/** Flushes the log (if it can be), then exits: the last lines of a process are the ones that explain it. */
export async function exitAfterFlush(log: Logger, code: number): Promise<never> {
  await log.flush?.().catch(() => {});
  process.exit(code);
}

function flush(logger: pino.Logger): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, FLUSH_TIMEOUT_MS);
    timer.unref();
    try {
      logger.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}

/**
 * Lines reach stdout's SonicBoom in batches: what was logged within BATCH_MS, up to BATCH_BYTES.
 * SonicBoom starts an asynchronous write (a hop to libuv's thread pool and back) as soon as the
 * previous one is done, and measures the UTF-8 length of its whole pending buffer on every line; at
 * some thousand lines a second those writes cost more than the lines themselves. The order of lines
 * is kept (every line of the process goes through here), and so are the last of them: `flush` and
 * the process's exit hand over what is pending first.
 *
 * A batch's size is counted in UTF-8 bytes without measuring every line: a UTF-16 code unit is one to
 * three bytes, so lines are appended unmeasured (`unmeasured`, after `measured`) while three bytes a unit
 * would still fit, and measured (once each, with whatever was unmeasured before them) only near the cap.
 */
function batched(sonic: ReturnType<typeof pino.destination>): DestinationStream & { flush(cb: (err?: Error) => void): void } {
  // What waits is `measured + unmeasured`, in that order; `measuredBytes` is the UTF-8 length of `measured`.
  let measured = '';
  let measuredBytes = 0;
  let unmeasured = '';
  let timer: NodeJS.Timeout | undefined;
  const handOver = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const batch = measured + unmeasured;
    if (batch === '') return;
    measured = unmeasured = '';
    measuredBytes = 0;
    sonic.write(batch);
  };
  process.once('exit', () => {
    if (measured === '' && unmeasured === '') return;
    try {
      handOver();
      sonic.flushSync();
    } catch {
      // Exiting anyway: stdout is gone or not ready.
    }
  });
  return {
    write(line: string) {
      if (measuredBytes + 3 * (unmeasured.length + line.length) <= BATCH_BYTES) {
        unmeasured += line;
      } else {
        if (unmeasured !== '') {
          measuredBytes += Buffer.byteLength(unmeasured);
          measured += unmeasured;
          unmeasured = '';
        }
        const bytes = Buffer.byteLength(line);
        if (measuredBytes + bytes > BATCH_BYTES) handOver();
        measured += line;
        measuredBytes += bytes;
      }
      timer ??= setTimeout(handOver, BATCH_MS).unref();
    },
    flush(cb) {
      handOver();
      sonic.flush(cb);
    },
  };
}

function lineSink(write: (line: string, isError: boolean) => void): DestinationStream {
  return {
    write(chunk: string) {
      const line = chunk.endsWith('\n') ? chunk.slice(0, -1) : chunk;
      write(line, line.startsWith('{"level":"warn"') || line.startsWith('{"level":"error"') || line.startsWith('{"level":"fatal"'));
    },
  };
}

/** pino's log formatter: a copy with credential-named fields censored (the caller's object is untouched). */
function redact(fields: Record<string, unknown>): Record<string, unknown> {
  return redactValue(fields, 0) as Record<string, unknown>;
}

function redactValue(value: unknown, depth: number): unknown {
  if (!value || typeof value !== 'object' || depth > 4 || value instanceof Error) return value;
  if (Array.isArray(value)) return value.some((v) => v && typeof v === 'object') ? value.map((v) => redactValue(v, depth + 1)) : value;
  let out: Record<string, unknown> | undefined;
  for (const [key, v] of Object.entries(value)) {
    const next = SECRET_NAME.test(key) ? REDACTED : redactValue(v, depth + 1);
    if (next !== v) {
      out ??= { ...(value as Record<string, unknown>) };
      out[key] = next;
    }
  }
  return out ?? value;
}
