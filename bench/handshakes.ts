// WebSocket handshakes, closed loop: each of `connections` slots opens a TCP connection, sends a
// handshake (RFC 6455 section 4.1) with the given headers, reads the answer's head, checks it is a 101
// with the right Sec-WebSocket-Accept, and closes; then the next. Prints one JSON line (LoadResult).
// Usage: node handshakes.js '{"origin":"http://127.0.0.1:N","path":"/x","headers":{},"connections":32,"duration":4}'
import { createHash, randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { Samples, type LoadResult } from './stats.js';

interface Spec {
  origin: string;
  path: string;
  headers: Record<string, string>;
  connections: number;
  duration: number;
}

const spec = JSON.parse(process.argv[2] ?? '{}') as Spec;
const url = new URL(spec.origin);
const port = Number(url.port);
const extra = Object.entries(spec.headers).map(([n, v]) => `${n}: ${v}\r\n`).join('');
const samples = new Samples();
const statusCodes: Record<string, number> = {};
let total = 0;
let ok = 0;
let errors = 0;
const started = performance.now();
const deadline = started + spec.duration * 1000;

function one(): Promise<void> {
  return new Promise((resolve) => {
    const key = randomBytes(16).toString('base64');
    const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    const t0 = performance.now();
    const socket = connect(port, url.hostname);
    let head = '';
    let done = false;
    const finish = (status: number | undefined) => {
      if (done) return;
      done = true;
      if (status === undefined) errors++;
      else {
        total++;
        statusCodes[status] = (statusCodes[status] ?? 0) + 1;
        if (status === 101) {
          ok++;
          samples.push(performance.now() - t0);
        }
      }
      socket.destroy();
      resolve();
    };
    socket.setNoDelay(true);
    socket.on('error', () => finish(undefined));
    socket.on('close', () => finish(undefined));
    socket.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      const good = status !== 101 || new RegExp(`\\r\\nsec-websocket-accept: ${accept.replace(/[+/]/g, '\\$&')}\\r\\n`, 'i').test(head.slice(0, end + 2));
      finish(good ? status : 0);
    });
    socket.write(`GET ${spec.path} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`);
  });
}

async function slot(): Promise<void> {
  while (performance.now() < deadline) await one();
}

await Promise.all(Array.from({ length: spec.connections }, slot));
const durationS = (performance.now() - started) / 1000;
const result: LoadResult = { total, ok, durationS, rps: ok / durationS, ...samples.percentiles(), non2xx: total - ok, errors, timeouts: 0, statusCodes };
process.stdout.write(`${JSON.stringify(result)}\n`);
