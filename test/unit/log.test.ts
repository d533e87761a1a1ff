import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createLogger, logPlain, REDACTED, type Logger } from '../../src/log.js';

function capture(level: Parameters<typeof createLogger>[0]) {
  const lines: Array<{ line: string; isError: boolean }> = [];
  const log = createLogger(level, (line, isError) => lines.push({ line, isError }));
  return { log, lines, parsed: () => lines.map((l) => JSON.parse(l.line) as Record<string, unknown>) };
}

describe('logger (pino)', () => {
  it('writes one JSON object a line with level, ISO time, fields and msg, from the configured level up', () => {
    const { log, lines, parsed } = capture('info');
    log.debug('not shown');
    log.info('started', { port: 8080, routes: ['/v1/a'] });
    log.warn('careful');
    log.error('broken', { error: 'ECONNREFUSED' });
    expect(lines.map((l) => l.isError)).toEqual([false, true, true]);
    const [info, warn, error] = parsed();
    expect(info).toEqual({ level: 'info', time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), port: 8080, routes: ['/v1/a'], msg: 'started' });
    expect(warn).toMatchObject({ level: 'warn', msg: 'careful' });
    expect(error).toMatchObject({ level: 'error', msg: 'broken', error: 'ECONNREFUSED' });
    for (const l of lines) expect(l.line).not.toContain('\n');
  });

  it('redacts any field named like a credential, at any depth, without touching the caller object', () => {
    const { log, parsed } = capture('debug');
    const fields = {
      user: 'alice',
      authorization: 'Basic YWxpY2U6cHc=',
      headers: { Cookie: 'sid=1', 'x-request-id': 'abc', 'Proxy-Authorization': 'Basic x' },
      body: { appKey: 'alice', appSecret: 'pw', refreshToken: 'r.t', password: 'pw' },
      list: [{ accessToken: 'eyJ' }],
      apiKey: 'k',
      status: 401,
    };
    log.debug('request', fields);
    expect(parsed()[0]).toMatchObject({
      user: 'alice',
      authorization: REDACTED,
      headers: { Cookie: REDACTED, 'x-request-id': 'abc', 'Proxy-Authorization': REDACTED },
      body: { appKey: 'alice', appSecret: REDACTED, refreshToken: REDACTED, password: REDACTED },
      list: [{ accessToken: REDACTED }],
      apiKey: REDACTED,
      status: 401,
    });
    expect(fields.authorization).toBe('Basic YWxpY2U6cHc=');
    expect(fields.body.password).toBe('pw');
  });

  it('writes a plain line (the access log\'s) as pino writes the same fields, byte for byte but the time', () => {
    const { log, lines } = capture('debug');
    const fields = {
      requestId: 'r1', path: '/v1/a "quoted"\\ \u00e9\u2028\n\u0001', status: 200, code: undefined, user: 'alice',
      forwardAuth: true, cut: false, bytes: 0, ms: 1.25, nan: Number.NaN, inf: Number.POSITIVE_INFINITY,
      pair: '\ud83d\ude00', tab: 'a\tb', del: '\u007f', backslash: 'C:\\x', plain: '0f8c2a7e-3b1d 127.0.0.1 /v1/x?y',
    };
    log.plain!('info', 'request', fields);
    log.info('request', fields);
    log.plain!('debug', 'probe "x"', { n: -0 });
    log.debug('probe "x"', { n: -0 });
    const [plain, pinos, plainDebug, pinoDebug] = lines.map((l) => l.line.replace(/"time":"[^"]+"/, '"time":"T"'));
    expect(plain).toBe(pinos);
    expect(plainDebug).toBe(pinoDebug);
    expect(JSON.parse(lines[0]!.line)).toMatchObject({ level: 'info', path: fields.path, nan: null, inf: null, msg: 'request' });
    expect(JSON.parse(lines[0]!.line)).not.toHaveProperty('code');
    // A lone surrogate is escaped as JSON.stringify does (pino writes it raw; it leaves the process as U+FFFD).
    log.plain!('info', 'request', { lone: 'a\ud800b' });
    expect(lines[4]!.line).toContain('"lone":"a\\ud800b"');
  });

  it('never writes a credential-named field of a plain line, and leaves out plain lines below the level', () => {
    const { log, parsed } = capture('info');
    log.plain!('info', 'request', { user: 'alice', apiKey: 'k', accessToken: 'eyJ', status: 200 });
    log.plain!('debug', 'request', { user: 'bob' });
    expect(parsed()).toEqual([{ level: 'info', time: expect.any(String), user: 'alice', apiKey: REDACTED, accessToken: REDACTED, status: 200, msg: 'request' }]);
  });

  it('hands a plain line to a logger without `plain` as an ordinary line', () => {
    const seen: Array<[string, string, unknown]> = [];
    const log: Logger = {
      debug: (msg, fields) => seen.push(['debug', msg, fields]), info: (msg, fields) => seen.push(['info', msg, fields]),
      warn: () => {}, error: () => {},
    };
    logPlain(log, 'debug', 'request', { path: '/healthz' });
    logPlain(log, 'info', 'request', { path: '/v1/a' });
    expect(seen).toEqual([['debug', 'request', { path: '/healthz' }], ['info', 'request', { path: '/v1/a' }]]);
  });

  it('writes nothing at silent', () => {
    const { log, lines } = capture('silent');
    log.error('x');
    expect(lines).toEqual([]);
  });

  it('loses no line when a process exits right after logging (asynchronous destination, flushed on exit)', () => {
    const logModule = pathToFileURL(join(import.meta.dirname, '../../dist/src/log.js')).href;
    const script = `
      import { createLogger, exitAfterFlush } from ${JSON.stringify(logModule)};
      const log = createLogger('info');
      const pad = 'x'.repeat(200);
      for (let i = 0; i < 20000; i++) {
        if (i % 2) log.info('line', { i, pad });
        else log.plain('info', 'line', { i, pad });
      }
      log.info('last');
      ${'${EXIT}'}`;
    const exits: Array<[string, number]> = [['await exitAfterFlush(log, 3);', 3], ['process.exit(3);', 3], ["throw new Error('boom');", 1]];
    for (const [exit, status] of exits) {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script.replace('${EXIT}', exit)], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 15_000 });
      expect(r.status).toBe(status);
      const lines = r.stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(20001);
      // In the order they were logged, batched or not.
      expect(lines.slice(0, -1).every((l, i) => (JSON.parse(l) as { i: number }).i === i)).toBe(true);
      expect(JSON.parse(lines.at(-1)!)).toMatchObject({ level: 'info', msg: 'last' });
    }
  });

  /** Runs `body` (with `log`, a stdout logger) in a process; every write SonicBoom makes to stdout, by size in bytes. */
  function stdoutWrites(body: string) {
    const logModule = pathToFileURL(join(import.meta.dirname, '../../dist/src/log.js')).href;
    // stderr is the report.
    const script = `
      import fs from 'node:fs';
      const sizes = [];
      for (const name of ['write', 'writeSync']) {
        const original = fs[name];
        fs[name] = function (fd, data, ...rest) {
          if (fd === 1) sizes.push(Buffer.byteLength(data));
          return original.call(this, fd, data, ...rest);
        };
      }
      const { createLogger } = await import(${JSON.stringify(logModule)});
      const log = createLogger('info');
      ${body}
      setTimeout(() => {}, 200);
      process.on('exit', () => process.stderr.write(JSON.stringify(sizes)));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 15_000 });
    expect(r.status).toBe(0);
    const sizes = JSON.parse(r.stderr) as number[];
    const lines = r.stdout.split('\n').slice(0, -1);
    // Every byte went through a recorded write (a partial write of a full pipe would be recorded twice).
    expect(sizes.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(Buffer.byteLength(r.stdout));
    return { sizes, lines: lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
  }

  it('writes stdout in batches of at most 16 KiB, whole lines each, in order', () => {
    const { sizes, lines } = stdoutWrites(`
      const pad = 'x'.repeat(250);
      for (let i = 0; i < 2000; i++) log.plain('info', 'request', { i, pad });`);
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(16 * 1024);
    // Batches, not a write per line: about 600 KB in some forty writes.
    expect(sizes.length).toBeLessThan(100);
  });

  it('counts a batch\'s 16 KiB in UTF-8 bytes, not characters (user names in Cyrillic, CJK, emoji)', () => {
    // 2, 3 and 4 bytes a character; ASCII lines among them.
    const { sizes, lines } = stdoutWrites(`
      const users = ['\u0436\u0435\u043d\u044f'.repeat(30), '\u540d\u524d'.repeat(60), '\ud83d\ude00'.repeat(40), 'alice'];
      for (let i = 0; i < 2000; i++) {
        if (i % 2) log.info('request', { i, user: users[i % 4] });
        else log.plain('info', 'request', { i, user: users[i % 4] });
      }`);
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
    expect(lines[1]).toMatchObject({ user: '\u540d\u524d'.repeat(60) });
    expect(Math.max(...sizes)).toBeLessThanOrEqual(16 * 1024);
    // Still batches, and nearly full ones: about 500 KB in some thirty-five writes.
    expect(sizes.length).toBeLessThan(60);
  });

  it('writes a line within moments when nothing else is logged (a batch waits for no more lines)', () => {
    const logModule = pathToFileURL(join(import.meta.dirname, '../../dist/src/log.js')).href;
    // A line logged, then 300 ms of nothing, then a mark written straight to stdout: the line comes first.
    const script = `
      import { writeSync } from 'node:fs';
      import { createLogger } from ${JSON.stringify(logModule)};
      const log = createLogger('info');
      log.warn('alone');
      log.plain('info', 'request', { status: 200 });
      setTimeout(() => { writeSync(1, 'MARK\\n'); process.exit(0); }, 300);`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 15_000 });
    expect(r.status).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'warn', msg: 'alone' });
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: 'info', msg: 'request', status: 200 });
    expect(lines[2]).toBe('MARK');
  });
});
