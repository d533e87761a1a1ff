import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createLogger, REDACTED } from '../../src/log.js';

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
      for (let i = 0; i < 20000; i++) log.info('line', { i, pad });
      log.info('last');
      ${'${EXIT}'}`;
    for (const exit of ['await exitAfterFlush(log, 3);', 'process.exit(3);']) {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script.replace('${EXIT}', exit)], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 15_000 });
      expect(r.status).toBe(3);
      const lines = r.stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(20001);
      expect(JSON.parse(lines.at(-1)!)).toMatchObject({ level: 'info', msg: 'last' });
    }
  });
});
