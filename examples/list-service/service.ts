// The example upstream behind the gateway: a small paged list service on
// node:http. `createListService` builds the server; the caller listens.

import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { DEFAULT_RECORDS, DEFAULT_SEED, generateDataset } from './data.js';
import type { Contact, Conversation, Dataset } from './data.js';
import { upgradeLive } from './live.js';
import { paginate, parsePageRequest, sortRecords } from './paging.js';
import type { Page } from './paging.js';

export type { Contact, Conversation } from './data.js';
export type { Page } from './paging.js';
export { DEFAULT_RECORDS, DEFAULT_SEED } from './data.js';

export interface ListServiceOptions {
  /** Number of conversations and of contacts (each). Default 1000. */
  records?: number;
  /** PRNG seed. Default 42. */
  seed?: number;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
}

const CONVERSATION_SORT_PROPERTIES = ['campaignId', 'createdAt', 'id', 'status'] as const;
const CONTACT_SORT_PROPERTIES = ['name', 'createdAt', 'id'] as const;
const PHONE_LOOKUP_SORT_PROPERTIES = ['name', 'createdAt', 'id', 'phoneNumber'] as const;

type Outcome = { status: 200; body: unknown } | { status: number; problem: Problem };
type RouteHandler = (params: URLSearchParams) => Outcome;

const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  500: 'Internal Server Error',
};

function problem(status: number, code: string, detail: string): Outcome {
  const title = TITLES[status] ?? 'Error';
  return { status, problem: { type: 'about:blank', title, status, detail, code } };
}

function pageOf<K extends string, T extends Record<K, string>>(
  records: readonly T[],
  params: URLSearchParams,
  sortable: readonly K[],
): Outcome {
  const request = parsePageRequest(params, sortable);
  if (!request.ok) return problem(400, request.code, request.detail);
  const body: Page<T> = paginate(records, request.value);
  return { status: 200, body };
}

/** URLSearchParams turns an unencoded '+' into a space; undo that for phone numbers. */
function normalizePhoneNumber(raw: string): string {
  return raw.startsWith(' ') ? `+${raw.slice(1)}` : raw;
}

function phoneLookup(byPhone: readonly Contact[], params: URLSearchParams): Outcome {
  const values = params.getAll('phoneNumber');
  if (values.length > 1) return problem(400, 'invalid_parameter', `'phoneNumber' must be given at most once`);
  const raw = values[0];
  if (raw === undefined) return pageOf(byPhone, params, PHONE_LOOKUP_SORT_PROPERTIES);
  if (raw === '') return problem(400, 'invalid_parameter', `'phoneNumber' must not be empty`);
  const phoneNumber = normalizePhoneNumber(raw);
  const matches = byPhone.filter((contact) => contact.phoneNumber === phoneNumber);
  return pageOf(matches, params, PHONE_LOOKUP_SORT_PROPERTIES);
}

function buildRoutes(data: Dataset): ReadonlyMap<string, RouteHandler> {
  const conversations: readonly Conversation[] = data.conversations;
  const byPhone = sortRecords(data.contacts, [
    { property: 'phoneNumber', direction: 'asc' },
    { property: 'id', direction: 'asc' },
  ]);
  return new Map<string, RouteHandler>([
    ['/healthz', () => ({ status: 200, body: { status: 'ok' } })],
    ['/v1/conversations', (params) => pageOf(conversations, params, CONVERSATION_SORT_PROPERTIES)],
    ['/v1/contacts', (params) => pageOf(data.contacts, params, CONTACT_SORT_PROPERTIES)],
    ['/v1/contacts/phoneNumber', (params) => phoneLookup(byPhone, params)],
  ]);
}

/** Node rejects header values with these characters; never echo them. */
const INVALID_HEADER_CHAR = /[^\t\x20-\x7e\x80-\xff]/;

function echo(res: ServerResponse, name: string, value: string | undefined): void {
  if (value !== undefined && !INVALID_HEADER_CHAR.test(value)) res.setHeader(name, value);
}

/** Debugging aid: tells the caller what the upstream received. */
function echoRequest(req: IncomingMessage, res: ServerResponse, query: string): void {
  const user = req.headers['x-authenticated-user'];
  echo(res, 'X-Upstream-Saw-User', Array.isArray(user) ? user.join(', ') : user);
  echo(res, 'X-Upstream-Saw-Query', query);
  echo(res, 'X-Upstream-Saw-Authorization', req.headers.authorization === undefined ? 'absent' : 'present');
}

function send(res: ServerResponse, outcome: Outcome): void {
  const isProblem = 'problem' in outcome;
  const payload = JSON.stringify(isProblem ? outcome.problem : outcome.body);
  res.statusCode = outcome.status;
  res.setHeader('Content-Type', isProblem ? 'application/problem+json' : 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  res.setHeader('Cache-Control', 'no-store');
  res.end(payload);
}

function splitTarget(target: string): { path: string; query: string } {
  const mark = target.indexOf('?');
  return mark < 0 ? { path: target, query: '' } : { path: target.slice(0, mark), query: target.slice(mark + 1) };
}

function route(routes: ReadonlyMap<string, RouteHandler>, req: IncomingMessage, res: ServerResponse): Outcome {
  const { path, query } = splitTarget(req.url ?? '/');
  echoRequest(req, res, query);
  const handler = routes.get(path);
  if (handler === undefined) return problem(404, 'not_found', `no resource at '${path}'`);
  if (req.method !== 'GET') {
    res.setHeader('Allow', 'GET');
    return problem(405, 'method_not_allowed', `method ${req.method ?? '?'} is not allowed; use GET`);
  }
  return handler(new URLSearchParams(query));
}

function handle(routes: ReadonlyMap<string, RouteHandler>, req: IncomingMessage, res: ServerResponse): void {
  let outcome: Outcome;
  try {
    outcome = route(routes, req, res);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    outcome = problem(500, 'internal_error', detail);
  }
  send(res, outcome);
  req.resume(); // drain any request body so keep-alive connections stay usable
}

/** Builds the data once and returns a server that is not yet listening. */
export function createListService(options: ListServiceOptions = {}): Server {
  const data = generateDataset(options.records ?? DEFAULT_RECORDS, options.seed ?? DEFAULT_SEED);
  const routes = buildRoutes(data);
  const server = createServer((req, res) => handle(routes, req, res));
  server.on('upgrade', upgradeLive(() => ({ conversations: data.conversations.length, contacts: data.contacts.length })));
  return server;
}
