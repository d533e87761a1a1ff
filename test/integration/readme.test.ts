import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request, type Server } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createListService } from '../../examples/list-service/service.js';
import { loadConfig } from '../../src/config/load.js';
import { createGateway, type Gateway } from '../../src/server.js';

// The README's quick start, run as printed: the shipped configuration and demo user, the example list
// service behind the gateway, and the commands of the README's second shell block in one `sh -e`, with
// only the gateway's address put in place of 127.0.0.1:8080 (tests never take a fixed port).

const ROOT = join(import.meta.dirname, '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

let list: Server;
let gateway: Gateway;
let address: string;

beforeAll(async () => {
  list = createListService({ records: 50 });
  await new Promise<void>((resolve) => list.listen(0, '127.0.0.1', resolve));
  const listUrl = `http://127.0.0.1:${(list.address() as { port: number }).port}`;
  const config = loadConfig(join(ROOT, 'config/gateway.yaml'), {
    GATEWAY_JWT_SECRET: 'readme-test-secret-readme-test-secret-0123',
    CONVERSATIONS_URL: listUrl,
    CONTACTS_URL: listUrl,
  });
  config.server.host = '127.0.0.1';
  config.log.access = false;
  config.admin = false;
  gateway = createGateway(config);
  address = `127.0.0.1:${await gateway.listen(0)}`;
});
afterAll(async () => {
  await gateway?.close(1000);
  list?.closeAllConnections();
  await new Promise((resolve) => list?.close(resolve));
});

/** The fenced ```sh blocks of the README, in order. */
function shellBlocks(): string[] {
  return [...README.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

describe('README', () => {
  it('stays short, keeps the test and demo commands, links only to files of the repository', () => {
    expect(README.split('\n').length).toBeLessThanOrEqual(300);
    expect(README).toContain('npm test');
    expect(README).toContain('npm run demo');
    // The repository stands alone: no pointer to notes kept outside it.
    expect(README).not.toContain(['..', 'shared'].join('/'));
    for (const doc of ['docs/configuration.md', 'docs/api.md', 'docs/operating.md', 'docs/security.md', 'docs/architecture.md', 'bench/README.md', 'CONTRIBUTING.md']) {
      expect(README).toContain(`](${doc}`);
      expect(readFileSync(join(ROOT, doc), 'utf8').length).toBeGreaterThan(0);
    }
  });
});

describe('README quick start', () => {
  it('runs as printed: every variable is set before it is used, and the WebSocket example gets the greeting and its echo', async () => {
    const [start, commands] = shellBlocks();
    expect(start).toBe('npm ci && npm run demo\n');
    for (const [, name] of commands!.matchAll(/\$([A-Z_]+)/g)) expect(commands!.indexOf(`${name}=`)).toBeGreaterThanOrEqual(0);
    const script = commands!.replaceAll('127.0.0.1:8080', address);
    const { stdout } = await promisify(execFile)('sh', ['-e', '-c', script], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME }, timeout: 50_000 });
    const lines = stdout.split('\n');
    expect(lines[0]).toMatch(/^\{"accessToken":"[^"]+","refreshToken":"[^"]+","expiresInSeconds":5400\}/);
    const pages = stdout.match(/"content":\[/g) ?? [];
    expect(pages).toHaveLength(2);
    expect(stdout).toContain('{"type":"hello","conversations":50,"contacts":50}');
    expect(stdout).toContain('{"type":"echo","data":"hello through the gateway"}');
  }, 60_000); // five processes (curl, node) one after another: seconds each on a loaded machine
});

describe('the example list service\'s WebSocket endpoint', () => {
  it('answers a handshake elsewhere with a 404 problem, passed on by the gateway', async () => {
    const [host, port] = address.split(':');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({
        host, port: Number(port), path: '/v1/conversations/not-live',
        headers: {
          authorization: `Basic ${Buffer.from('demo:demo-password').toString('base64')}`,
          connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('upgrade', (_res, socket) => {
        socket.destroy();
        reject(new Error('upgraded'));
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(404);
  });
});
