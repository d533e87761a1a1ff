import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { rootCertificates } from 'node:tls';
import { ConfigError } from '../config/config-error.js';

/** One GET to an OpenID provider: discovery or its JWK Set. */
export interface ProviderAnswer {
  body: unknown;
  /** Cache-Control of the answer, when it had one. */
  cacheControl: string | undefined;
}

/** Longest a provider may take to answer one GET. */
const PROVIDER_TIMEOUT_MS = 5000;
/** Largest discovery document or JWK Set read (they are a few KiB). */
const MAX_BYTES = 512 * 1024;

/**
 * The trust for a provider's TLS: the system's CAs plus the PEM file of `caFile`, read once when the
 * configuration is built (a missing file stops the start or the reload, as any unreadable key file).
 */
export function providerCa(caFile: string | undefined, configKey: string): string[] | undefined {
  if (caFile === undefined) return undefined;
  try {
    return [...rootCertificates, readFileSync(caFile, 'utf8')];
  } catch (err) {
    throw new ConfigError([`${configKey}: ${caFile} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
}

/**
 * GETs a JSON document: 200 only, no redirects, at most MAX_BYTES, within PROVIDER_TIMEOUT_MS, the
 * provider's certificate checked against `ca` (undefined: the system's CAs).
 */
export function getJson(url: string, ca: string[] | undefined): Promise<ProviderAnswer> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(u, { method: 'GET', headers: { accept: 'application/json' }, ...(ca && u.protocol === 'https:' ? { ca } : {}), timeout: PROVIDER_TIMEOUT_MS });
    const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${PROVIDER_TIMEOUT_MS} ms`)), PROVIDER_TIMEOUT_MS);
    req.on('timeout', () => req.destroy(new Error(`no answer within ${PROVIDER_TIMEOUT_MS} ms`)));
    req.on('error', (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    req.on('response', (res: IncomingMessage) => {
      if (res.statusCode !== 200) {
        res.resume();
        clearTimeout(deadline);
        reject(new Error(`HTTP ${res.statusCode}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BYTES) req.destroy(new Error(`answer larger than ${MAX_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('error', (err) => {
        clearTimeout(deadline);
        reject(err);
      });
      res.on('end', () => {
        clearTimeout(deadline);
        try {
          const cc = res.headers['cache-control'];
          resolve({ body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown, cacheControl: cc });
        } catch {
          reject(new Error('the answer is not JSON'));
        }
      });
    });
    req.end();
  });
}

/** Why a fetch failed, in a few words (`ECONNREFUSED`, `HTTP 500`, `self-signed certificate`). */
export function fetchFailure(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e.code && e.code !== 'ERR_TLS_CERT_ALTNAME_INVALID') return e.message && !e.message.startsWith(e.code) ? `${e.code}: ${e.message}` : e.code;
  return e.message ?? String(err);
}

/** The requests a relying-party library makes (openid-client's customFetch). */
export interface FetchInit {
  body?: ArrayBuffer | null | ReadableStream | string | Uint8Array | URLSearchParams;
  headers: Record<string, string>;
  method: string;
  signal?: AbortSignal;
}

/**
 * A fetch for openid-client (discovery, the token endpoint, userinfo) that trusts `ca` (the issuer's
 * caFile beside the system's CAs, undefined: the system's), follows no redirect, reads at most
 * MAX_BYTES and gives up after PROVIDER_TIMEOUT_MS.
 */
export function providerFetch(ca: string[] | undefined): (url: string, init: FetchInit) => Promise<Response> {
  return async (url, init) => {
    const body = init.body === undefined || init.body === null ? undefined
      : typeof init.body === 'string' ? init.body
        : init.body instanceof URLSearchParams ? init.body.toString()
          : init.body instanceof ReadableStream ? Buffer.from(await new Response(init.body).arrayBuffer())
            : Buffer.from(init.body instanceof ArrayBuffer ? new Uint8Array(init.body) : init.body);
    return new Promise<Response>((resolve, reject) => {
      const u = new URL(url);
      const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = send(u, { method: init.method, headers: init.headers, ...(ca && u.protocol === 'https:' ? { ca } : {}), timeout: PROVIDER_TIMEOUT_MS });
      const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${PROVIDER_TIMEOUT_MS} ms`)), PROVIDER_TIMEOUT_MS);
      const fail = (err: Error) => {
        clearTimeout(deadline);
        reject(err);
      };
      init.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')), { once: true });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${PROVIDER_TIMEOUT_MS} ms`)));
      req.on('error', fail);
      req.on('response', (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BYTES) req.destroy(new Error(`answer larger than ${MAX_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.on('error', fail);
        res.on('end', () => {
          clearTimeout(deadline);
          const headers = new Headers();
          for (let i = 0; i < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          const status = res.statusCode ?? 502;
          const empty = status === 204 || status === 304 || (status >= 100 && status < 200);
          resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers }));
        });
      });
      req.end(body);
    });
  };
}
