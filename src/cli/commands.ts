import { DEFAULT_CONFIG_FILE } from '../config/load.js';

/** One command of the CLI: how it is called, what it does, the options it takes. */
export interface CommandSpec {
  /** `serve`, `config check`, `sessions list`… */
  name: string;
  /** The arguments after the name, as shown in the usage. */
  synopsis: string;
  summary: string;
  /** Option names this command accepts (beyond --help). */
  options: readonly OptionName[];
  /** Positional arguments after the name (`users hash NAME`: 1). */
  positionals: number;
  /** What `<command> --help` adds below the synopsis. */
  details: string;
}

export const OPTIONS = {
  config: { type: 'string', short: 'c', help: `-c, --config FILE   the configuration file (default ${DEFAULT_CONFIG_FILE})` },
  watch: { type: 'boolean', help: '--watch             also reload when the file changes' },
  connect: { type: 'boolean', help: '--connect           also check that the store, the directory and each upstream answer' },
  cost: { type: 'string', help: '--cost N            bcrypt cost, 4 to 31 (default 10; below 10 is for tests only)' },
  user: { type: 'string', help: '--user NAME         the user name' },
  address: { type: 'string', help: '--address IP        the client address (IPv4 or IPv6)' },
  name: { type: 'string', help: '--name NAME         the key\'s name (its user too, unless --user)' },
  groups: { type: 'string', help: '--groups A,B        groups, comma-separated' },
  routes: { type: 'string', help: '--routes /P,/Q      the only paths (and what is under them) it may call' },
  methods: { type: 'string', help: '--methods GET,HEAD  the only methods it may use' },
  'expires-in': { type: 'string', help: '--expires-in 90d    it expires then (s, m, h, d, w)' },
  rate: { type: 'string', help: '--rate 100/60s      its own rate limit, beside the route\'s' },
  set: { type: 'string', help: '--set A,B           the groups the user is in from now on' },
  overlap: { type: 'string', help: '--overlap 24h       the old key works this much longer (default 0: revoked at once)' },
  listen: { type: 'string', help: '--listen ADDR:PORT  where the front proxy listens (default :80)' },
  gateway: { type: 'string', help: '--gateway URL       where the front proxy reaches the gateway (default from server.host and server.port)' },
} as const;

export type OptionName = keyof typeof OPTIONS;

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'serve', synopsis: '[--config FILE] [--watch]', summary: 'run the gateway', options: ['config', 'watch'], positionals: 0,
    details: 'Serves until SIGTERM/SIGINT (then drains). SIGHUP reloads the configuration; a broken one is logged and the one in force stays.',
  },
  {
    name: 'config check', synopsis: '[--config FILE] [--connect]', summary: 'validate a configuration (and the files it names) and exit', options: ['config', 'connect'], positionals: 0,
    details: 'Lists every problem at once (exit 2) and warnings about what serves but is most likely not meant (a lower-case method, a user or group in neither file, a guarded route under an unguarded one), which do not change the exit code. With --connect it also checks that the store is ready as the gateway would use it, that the directory of users.ldap accepts the service bind (or, without bindDn, an anonymous read of its root DSE) and that each upstream target answers HTTP (any status passes: the target is reachable).',
  },
  {
    name: 'recipe', synopsis: 'nginx|caddy|traefik|ingress-nginx [--config FILE] [--listen ADDR:PORT] [--gateway URL]', summary: 'print a front proxy\'s configuration that fronts the site with forward-auth to this gateway', options: ['config', 'listen', 'gateway'], positionals: 1,
    details: 'Made from the configuration (forwardAuth, routes and their upstreams, login, identity.assertion, apiKeys): every request is asked of the gateway, refusals reach the client as the gateway writes them, and the headers the gateway removes are cleared by the proxy too. Warnings (settings the proxy cannot honour as the gateway does) go to stderr. Regenerate after every upgrade and configuration change. nginx: a conf.d/ file; caddy: a site block; traefik: dynamic configuration (file provider); ingress-nginx: Kubernetes objects. See docs/front-proxy.md.',
  },
  {
    name: 'users hash', synopsis: 'NAME [--cost N]', summary: 'print an htpasswd line for a user', options: ['cost'], positionals: 1,
    details: 'On a terminal the password is asked for twice without echo; otherwise it is read from stdin. Passwords of fewer than 8 characters or more than 72 bytes are refused.',
  },
  {
    name: 'sessions list', synopsis: '--user NAME [--config FILE]', summary: 'list a user\'s live sessions (id, created, last refresh)', options: ['config', 'user'], positionals: 0,
    details: 'Needs the shared store (store.kind: redis); reads only the store settings of the file.',
  },
  {
    name: 'sessions revoke', synopsis: '--user NAME [--config FILE]', summary: 'end every session of a user on every instance', options: ['config', 'user'], positionals: 0,
    details: 'Needs the shared store (store.kind: redis); reads only the store settings of the file.',
  },
  {
    name: 'lockout clear', synopsis: '[--user NAME] [--address IP] [--config FILE]', summary: 'lift a brute-force lock in the shared store', options: ['config', 'user', 'address'], positionals: 0,
    details: 'At least one of --user and --address. Needs the shared store (store.kind: redis); reads only the store and lockout settings of the file.',
  },
  {
    name: 'users add', synopsis: 'NAME [--groups A,B] [--cost N] [--config FILE]', summary: 'add a user to the store (users.store)', options: ['config', 'groups', 'cost'], positionals: 1,
    details: 'On a terminal the password is asked for twice without echo; otherwise it is read from stdin. Every instance accepts the user at once, no reload. A name in the users file is refused. Needs the shared store (store.kind: redis).',
  },
  {
    name: 'users passwd', synopsis: 'NAME [--cost N] [--config FILE]', summary: 'change the password of a user of the store', options: ['config', 'cost'], positionals: 1,
    details: 'The password is read as by users add. The user\'s sessions end on every instance before it answers.',
  },
  {
    name: 'users remove', synopsis: 'NAME [--config FILE]', summary: 'remove a user from the store and end its sessions everywhere', options: ['config'], positionals: 1,
    details: 'Every instance refuses the user at once; its sessions end on every instance before it answers.',
  },
  {
    name: 'users groups', synopsis: 'NAME --set A,B [--config FILE]', summary: 'set the groups of a user of the store', options: ['config', 'set'], positionals: 1,
    details: 'Replaces the user\'s groups (what allow rules and identity headers read); --set "" leaves it in none.',
  },
  {
    name: 'users list', synopsis: '[--config FILE]', summary: 'list the users of the store (never a hash)', options: ['config'], positionals: 0,
    details: 'One line a user: name, groups, last change. Needs the shared store.',
  },
  {
    name: 'users import', synopsis: 'FILE [--config FILE]', summary: 'add the users of an htpasswd file to the store', options: ['config'], positionals: 1,
    details: 'bcrypt lines only; users already in the store are left as they are; a name also in the configured users file stops the import before anything is written.',
  },
  {
    name: 'keys create', synopsis: '--name NAME [--user U] [--groups A,B] [--routes /P,/Q] [--methods M,N] [--expires-in 90d] [--rate 100/60s] [--config FILE]', summary: 'create an API key and print it once', options: ['config', 'name', 'user', 'groups', 'routes', 'methods', 'expires-in', 'rate'], positionals: 0,
    details: 'Prints the key (<prefix>_<id>_<secret>) alone on stdout; the store keeps only the SHA-256 of its secret. Needs the shared store (store.kind: redis); reads only the store and apiKeys settings of the file.',
  },
  {
    name: 'keys list', synopsis: '[--config FILE]', summary: 'list the API keys (never a secret)', options: ['config'], positionals: 0,
    details: 'One line a key: id, name, user, groups, routes, methods, rate, expiry, created, last used (written at most once a minute). Needs the shared store.',
  },
  {
    name: 'keys revoke', synopsis: 'ID [--config FILE]', summary: 'revoke an API key on every instance', options: ['config'], positionals: 1,
    details: 'Answers once no instance accepts the key any more. Needs the shared store.',
  },
  {
    name: 'keys rotate', synopsis: 'ID [--overlap 24h] [--config FILE]', summary: 'replace an API key; print the new one once', options: ['config', 'overlap'], positionals: 1,
    details: 'The new key has the old one\'s name, user, groups, routes, methods, rate and lifetime; the old one works until the overlap ends (default 0: revoked at once). Needs the shared store.',
  },
];

/** The whole usage: every command on a line or two. */
export function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => `${c.name} ${c.synopsis}`.length)) + 2;
  return [
    'usage: auth-gateway <command> [options]',
    '',
    ...COMMANDS.map((c) => `  auth-gateway ${`${c.name} ${c.synopsis}`.padEnd(width)}${c.summary}`),
    '',
    '  auth-gateway --help | <command> --help   this text, or one command\'s',
    '  auth-gateway --version                   the version',
    '',
    'Exit codes: 0 done, 1 the gateway failed (to start or while running) or the store could not be reached, 2 a usage, configuration or input error, 130 cancelled.',
  ].join('\n');
}

/** One command's usage, for `<command> --help` and after a usage error in it. */
export function commandUsage(spec: CommandSpec): string {
  return [
    `usage: auth-gateway ${spec.name} ${spec.synopsis}`,
    '',
    `${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}. ${spec.details}`,
    '',
    'options:',
    ...spec.options.map((o) => `  ${OPTIONS[o].help}`),
    '  -h, --help          this text',
  ].join('\n');
}
