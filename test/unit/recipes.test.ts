import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parseAllDocuments, parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadRecipeConfig } from '../../src/cli/config.js';
import { REMOVED_HEADERS } from '../../src/core/header-table.js';
import { DOCS_EXAMPLE, DOCS_PAGE, renderRecipeBlocks } from '../../src/recipes/docs.js';
import { recipe, RecipeError } from '../../src/recipes/recipes.js';
import { titleCase, underscoreSpellings } from '../../src/recipes/site.js';
import { testConfig } from '../support/fixtures.js';

const root = join(import.meta.dirname, '../..');
const example = () => {
  const cwd = process.cwd();
  process.chdir(root);
  try {
    return loadRecipeConfig(DOCS_EXAMPLE);
  } finally {
    process.chdir(cwd);
  }
};

const base = {
  server: { host: '127.0.0.1', port: 8080, trustProxy: 1 },
  forwardAuth: { path: '/auth/verify', trustedProxies: ['127.0.0.1'] },
  upstreams: { app: { url: 'http://127.0.0.1:9001' } },
  routes: [{ path: '/api', upstream: 'app' }],
};
const config = (overrides: Record<string, unknown> = {}) => testConfig('/nonexistent/users.htpasswd', { ...base, ...overrides });

/** Every name of the table a proxy must clear or replace (families by their known names). */
const tableNames = () => REMOVED_HEADERS.filter((h) => h.kind !== 'forwarding').flatMap((h) => (h.family ? [...(h.members ?? [])] : [h.name]));

describe('docs/front-proxy.md', () => {
  it('prints exactly what `auth-gateway recipe` makes of docs/examples/front-door.yaml (npm run docs:recipes)', () => {
    const page = readFileSync(join(root, DOCS_PAGE), 'utf8');
    expect(page).toBe(renderRecipeBlocks(page, example()));
  });

  it('no other doc prints a hand-written nginx or Caddy forward-auth block', () => {
    for (const file of ['authorization.md', 'openid.md', 'service-credentials.md', 'security.md']) {
      const text = readFileSync(join(root, 'docs', file), 'utf8');
      expect(text, file).not.toMatch(/```(nginx|caddyfile)/);
    }
  });
});

describe('a recipe is refused where it could not be safe', () => {
  it.each([
    ['no forwardAuth', { forwardAuth: undefined }, /forwardAuth/],
    ['a route without an upstream', { routes: [{ path: '/api' }] }, /\/api has no upstream/],
    ['a route that strips its prefix', { routes: [{ path: '/api', upstream: 'app', stripPrefix: true }] }, /stripPrefix/],
    ['an upstream URL with a path', { upstreams: { app: { url: 'http://127.0.0.1:9001/base' } } }, /has a path/],
  ])('%s', (_, overrides, message) => {
    expect(() => recipe('nginx', config(overrides))).toThrow(RecipeError);
    expect(() => recipe('caddy', config(overrides))).toThrow(message);
  });

  it('warns where the proxy serves less than the gateway would', () => {
    const { warnings } = recipe('nginx', config({
      server: { host: '127.0.0.1', port: 8080 },
      forwardAuth: { path: '/auth/verify' },
      routes: [{ path: '/api', upstream: 'app', forwardAuthorization: true }],
    }));
    expect(warnings.join('\n')).toMatch(/trustedProxies/);
    expect(warnings.join('\n')).toMatch(/trustProxy/);
    expect(warnings.join('\n')).toMatch(/forwards Authorization/);
    expect(recipe('nginx', config()).warnings).toEqual([]);
  });

  it('a route to an HTTP/2 (gRPC) upstream: Caddy speaks HTTP/2 to it and says what its clients need; the others warn they cannot carry gRPC', () => {
    const h2 = config({ upstreams: { app: { url: 'http://127.0.0.1:9001', protocol: 'h2c' } } });
    const caddy = recipe('caddy', h2);
    expect(caddy.text).toMatch(/reverse_proxy @upstream_app 127\.0\.0\.1:9001 \{[\s\S]*?versions h2c 2/);
    expect(caddy.warnings.join('\n')).toMatch(/gRPC clients must reach Caddy over HTTP\/2 too/);
    for (const kind of ['nginx', 'traefik', 'ingress-nginx'] as const) {
      expect(recipe(kind, h2).warnings.join('\n'), kind).toMatch(/upstreams\.app, which speaks HTTP\/2 \(protocol: h2c\); the .* recipe passes HTTP\/1\.1/);
    }
  });

  it('refuses a listen or gateway address it cannot write', () => {
    expect(() => recipe('nginx', config(), { listen: 'eighty' })).toThrow(/--listen/);
    expect(() => recipe('nginx', config(), { gateway: 'ftp://x' })).toThrow(/--gateway/);
  });
});

describe('every recipe clears the one table', () => {
  const withKeys = () => config({ apiKeys: { header: 'X-Service-Key' } });

  it('nginx: every name set empty or to the answer\'s value, and _ names dropped', () => {
    const text = recipe('nginx', withKeys()).text;
    for (const name of [...tableNames(), 'x-service-key']) expect(text, name).toMatch(new RegExp(`proxy_set_header ${titleCase(name)} (""|\\$gw_)`));
    expect(text).toContain('underscores_in_headers off;');
    expect(text).toContain('proxy_set_header X-Gateway-Relay refusals;');
  });

  it('Caddy: every name deleted or copied from the answer, families and _ names by pattern', () => {
    const text = recipe('caddy', withKeys()).text;
    const copied = /copy_headers (.*)/.exec(text)![1]!.split(' ').map((h) => h.toLowerCase());
    for (const h of REMOVED_HEADERS.filter((x) => x.kind !== 'forwarding')) {
      if (h.family) expect(text).toContain(`request_header -${titleCase(h.name)}*`);
      else if (!copied.includes(h.name)) expect(text, h.name).toContain(`request_header -${titleCase(h.name)}\n`);
    }
    expect(text).toContain('request_header -X-Service-Key\n');
    expect(text).toContain('request_header -*_*');
  });

  it('Traefik: every name and every _ spelling of it, by name', () => {
    const doc = parse(recipe('traefik', withKeys()).text) as { http: { middlewares: Record<string, { headers?: { customRequestHeaders: Record<string, string> }; forwardAuth?: { authResponseHeaders: string[] } }> } };
    const cleared = Object.keys(doc.http.middlewares['auth-gateway-clear']!.headers!.customRequestHeaders).map((h) => h.toLowerCase());
    const answered = doc.http.middlewares['auth-gateway-ask']!.forwardAuth!.authResponseHeaders.map((h) => h.toLowerCase());
    for (const name of [...tableNames(), 'x-service-key']) {
      expect(cleared.includes(name) || answered.includes(name), name).toBe(true);
      for (const s of underscoreSpellings(name)) expect(cleared, s).toContain(s);
    }
  });
});

/** Traefik v3's dynamic configuration, the keys these recipes use, as its reference documents them. */
const traefikSchema = {
  type: 'object', additionalProperties: false, required: ['http'],
  properties: {
    http: {
      type: 'object', additionalProperties: false,
      properties: {
        middlewares: {
          type: 'object',
          additionalProperties: {
            type: 'object', additionalProperties: false, minProperties: 1, maxProperties: 1,
            properties: {
              forwardAuth: {
                type: 'object', additionalProperties: false, required: ['address'],
                properties: {
                  address: { type: 'string', pattern: '^https?://' },
                  trustForwardHeader: { type: 'boolean' },
                  authResponseHeaders: { type: 'array', items: { type: 'string', pattern: '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$' } },
                  authResponseHeadersRegex: { type: 'string' },
                  authRequestHeaders: { type: 'array', items: { type: 'string' } },
                  addAuthCookiesToResponse: { type: 'array', items: { type: 'string' } },
                },
              },
              headers: {
                type: 'object', additionalProperties: false,
                properties: { customRequestHeaders: { type: 'object', additionalProperties: { type: 'string' }, propertyNames: { pattern: '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$' } } },
              },
            },
          },
        },
        routers: {
          type: 'object',
          additionalProperties: {
            type: 'object', additionalProperties: false, required: ['rule', 'service'],
            properties: {
              rule: { type: 'string' },
              priority: { type: 'integer', minimum: 0 },
              middlewares: { type: 'array', items: { type: 'string' } },
              service: { type: 'string' },
              entryPoints: { type: 'array', items: { type: 'string' } },
            },
          },
        },
        services: {
          type: 'object',
          additionalProperties: {
            type: 'object', additionalProperties: false, required: ['loadBalancer'],
            properties: {
              loadBalancer: {
                type: 'object', additionalProperties: false, required: ['servers'],
                properties: {
                  passHostHeader: { type: 'boolean' },
                  servers: { type: 'array', minItems: 1, items: { type: 'object', additionalProperties: false, required: ['url'], properties: { url: { type: 'string', pattern: '^https?://' } } } },
                },
              },
            },
          },
        },
      },
    },
  },
};

describe('Traefik output against its documented schema', () => {
  it('validates, and every middleware and service a router names exists', () => {
    const doc = parse(recipe('traefik', example()).text) as { http: { routers: Record<string, { middlewares?: string[]; service: string; rule: string }>; middlewares: Record<string, unknown>; services: Record<string, unknown> } };
    const validate = new Ajv({ allErrors: true }).compile(traefikSchema);
    expect(validate(doc), JSON.stringify(validate.errors)).toBe(true);
    for (const [name, router] of Object.entries(doc.http.routers)) {
      for (const m of router.middlewares ?? []) expect(doc.http.middlewares, `${name} → ${m}`).toHaveProperty([m]);
      expect(doc.http.services, `${name} → ${router.service}`).toHaveProperty([router.service]);
      // Rules in Traefik v3's matcher syntax, backquoted.
      expect(router.rule).toMatch(/^(?:(?:Path|PathPrefix|PathRegexp)\(`[^`]+`\)(?: \|\| )?)+$/);
    }
    // The routes' paths, in any case, the longer the higher.
    expect(doc.http.routers['upstream-app']!.rule).toBe('PathRegexp(`(?i)^/api(/|$)`) || PathRegexp(`(?i)^/api/admin(/|$)`)');
  });
});

/** The ingress-nginx annotations its documentation lists that these recipes use. */
const INGRESS_NGINX_ANNOTATIONS = [
  'auth-url', 'auth-proxy-set-headers', 'auth-response-headers', 'configuration-snippet', 'server-snippet', 'auth-signin', 'auth-method',
].map((a) => `nginx.ingress.kubernetes.io/${a}`);
const dns1123Label = { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 };
const metadata = { type: 'object', required: ['name'], additionalProperties: false, properties: { name: dns1123Label, namespace: dns1123Label, annotations: { type: 'object', additionalProperties: { type: 'string' }, propertyNames: { enum: INGRESS_NGINX_ANNOTATIONS } } } };
/** The Kubernetes API's schema (core/v1 ConfigMap and Service, networking.k8s.io/v1 Ingress), the fields used here. */
const kubernetesSchema = {
  oneOf: [
    { type: 'object', additionalProperties: false, required: ['apiVersion', 'kind', 'metadata', 'data'], properties: { apiVersion: { const: 'v1' }, kind: { const: 'ConfigMap' }, metadata, data: { type: 'object', additionalProperties: { type: 'string' } } } },
    {
      type: 'object', additionalProperties: false, required: ['apiVersion', 'kind', 'metadata', 'spec'],
      properties: {
        apiVersion: { const: 'v1' }, kind: { const: 'Service' }, metadata,
        spec: { type: 'object', additionalProperties: false, required: ['type', 'externalName'], properties: { type: { const: 'ExternalName' }, externalName: { type: 'string', minLength: 1 }, ports: { type: 'array', items: { type: 'object', additionalProperties: false, required: ['port'], properties: { port: { type: 'integer', minimum: 1, maximum: 65535 } } } } } },
      },
    },
    {
      type: 'object', additionalProperties: false, required: ['apiVersion', 'kind', 'metadata', 'spec'],
      properties: {
        apiVersion: { const: 'networking.k8s.io/v1' }, kind: { const: 'Ingress' }, metadata,
        spec: {
          type: 'object', additionalProperties: false, required: ['rules'],
          properties: {
            ingressClassName: { type: 'string' },
            rules: {
              type: 'array', items: {
                type: 'object', additionalProperties: false, required: ['http'],
                properties: {
                  host: { type: 'string' },
                  http: {
                    type: 'object', additionalProperties: false, required: ['paths'], properties: {
                      paths: {
                        type: 'array', minItems: 1, items: {
                          type: 'object', additionalProperties: false, required: ['path', 'pathType', 'backend'],
                          properties: {
                            path: { type: 'string', pattern: '^/' },
                            pathType: { enum: ['Exact', 'Prefix', 'ImplementationSpecific'] },
                            backend: { type: 'object', additionalProperties: false, required: ['service'], properties: { service: { type: 'object', additionalProperties: false, required: ['name', 'port'], properties: { name: dns1123Label, port: { type: 'object', additionalProperties: false, properties: { number: { type: 'integer', minimum: 1, maximum: 65535 }, name: { type: 'string' } } } } } } },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  ],
};

describe('ingress-nginx output against the Kubernetes schema', () => {
  it('validates: a ConfigMap, Services and an Ingress whose backends and header ConfigMap exist', () => {
    const docs = parseAllDocuments(recipe('ingress-nginx', example()).text).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace: string; annotations?: Record<string, string> }; spec?: { rules: Array<{ http: { paths: Array<{ backend: { service: { name: string } } }> } }> } });
    const validate = new Ajv({ allErrors: true }).compile(kubernetesSchema);
    for (const d of docs) expect(validate(d), `${d.kind}: ${JSON.stringify(validate.errors)}`).toBe(true);
    const services = new Set(docs.filter((d) => d.kind === 'Service').map((d) => d.metadata.name));
    const ingress = docs.find((d) => d.kind === 'Ingress')!;
    for (const p of ingress.spec!.rules[0]!.http.paths) expect(services).toContain(p.backend.service.name);
    const annotations = ingress.metadata.annotations!;
    const [ns, name] = annotations['nginx.ingress.kubernetes.io/auth-proxy-set-headers']!.split('/');
    expect(docs.some((d) => d.kind === 'ConfigMap' && d.metadata.name === name && d.metadata.namespace === ns)).toBe(true);
    expect(annotations['nginx.ingress.kubernetes.io/configuration-snippet']).toContain('error_page 401 403 = @gateway_refusal;');
    expect(annotations['nginx.ingress.kubernetes.io/server-snippet']).toContain('location @gateway_refusal {');
  });
});
