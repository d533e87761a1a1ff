import { pino, type DestinationStream } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** Resolves when every line logged so far has been written (call before process.exit). */
  flush?(): Promise<void>;
}

/** A field whose name says it holds a credential is never written, at any depth. */
const SECRET_NAME = /authorization|password|passwd|secret|token|cookie|api[-_]?key|credential/i;
export const REDACTED = '[redacted]';
/** How long an exit waits for the log to drain before it goes anyway. */
const FLUSH_TIMEOUT_MS = 2000;

/**
 * pino, one JSON object a line: `{"level":"info","time":"<ISO>",...fields,"msg":"..."}`, every level on
 * stdout through an asynchronous destination (one ordered stream: a collector that reads stdout and
 * stderr separately cannot reorder a warning against the lines around it). `write` replaces the
 * destination (tests capture lines with it); `isError` is true for warn and error lines.
 */
export function createLogger(level: LogLevel, write?: (line: string, isError: boolean) => void): Logger {
  if (level === 'silent') return silentLogger;
  const destination = write ? lineSink(write) : pino.destination({ dest: 1, sync: false });
  const logger = pino({
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }), log: redact },
  }, destination);
  return {
    debug: (msg, fields) => logger.debug(fields ?? {}, msg),
    info: (msg, fields) => logger.info(fields ?? {}, msg),
    warn: (msg, fields) => logger.warn(fields ?? {}, msg),
    error: (msg, fields) => logger.error(fields ?? {}, msg),
    flush: () => flush(logger),
  };
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
