// `npm run demo`: the example list service and the gateway in front of it, in one process, with the
// demo user of config/users.htpasswd and a signing secret made up at start. Ctrl-C stops both.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { loadConfig } from '../src/config/load.js';
import { createLogger } from '../src/log.js';
import { createGateway } from '../src/server.js';
import { createListService } from './list-service/service.js';

const ROOT = join(import.meta.dirname, '..', '..');
const log = createLogger('info');

async function main(): Promise<void> {
  const listService = createListService();
  const listPort = await listenOn(listService, Number(process.env.LIST_SERVICE_PORT ?? 9001));
  const listUrl = `http://127.0.0.1:${listPort}`;

  const env: NodeJS.ProcessEnv = { ...process.env, CONVERSATIONS_URL: listUrl, CONTACTS_URL: listUrl };
  if (!env.GATEWAY_JWT_SECRET) {
    env.GATEWAY_JWT_SECRET = randomBytes(48).toString('base64url');
    log.warn('demo: GATEWAY_JWT_SECRET is not set; using a random secret made now (tokens die with this process)');
  }
  const config = loadConfig(join(ROOT, 'config', 'gateway.yaml'), env);
  config.server.host = '127.0.0.1';
  config.log.access = process.env.DEMO_ACCESS_LOG === '1';
  const gateway = createGateway(config, { log });
  let port: number;
  try {
    port = await gateway.listen();
  } catch {
    port = await gateway.listen(0);
    log.warn(`demo: port ${config.server.port} is taken; the gateway listens on ${port} instead`);
  }
  printHowTo(`http://127.0.0.1:${port}`, listUrl);

  const stop = () => {
    log.info('demo: stopping');
    listService.closeAllConnections();
    listService.close();
    gateway.close(1000).then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

function listenOn(server: Server, preferred: number): Promise<number> {
  const attempt = (port: number) => new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as { port: number }).port);
    });
  });
  return attempt(preferred).catch(() => attempt(0));
}

function printHowTo(gw: string, listUrl: string): void {
  const json = `-H 'Content-Type: application/json'`;
  process.stdout.write(`
auth-gateway demo
  gateway       ${gw}   (memory token store; access log ${process.env.DEMO_ACCESS_LOG === '1' ? 'on' : 'off: DEMO_ACCESS_LOG=1 turns it on'})
  list service  ${listUrl}   (example upstream: /v1/conversations, /v1/contacts, WebSocket /v1/conversations/live)
  user          demo / demo-password   (config/users.htpasswd)

Paste these into another terminal (they need curl and node):

# 1. Create a token pair
curl -s -X POST ${gw}/v1/tokens/create ${json} -d '{"appKey":"demo","appSecret":"demo-password"}' | tee /tmp/gw-tokens.json

# 2. A list call with HTTP Basic
curl -s -u demo:demo-password '${gw}/v1/conversations?size=10&page=1&sort=campaignId,desc'

# 3. A list call with the access token
ACCESS=$(node -pe 'JSON.parse(require("fs").readFileSync("/tmp/gw-tokens.json")).accessToken')
curl -s -H "Authorization: Bearer $ACCESS" '${gw}/v1/contacts?size=10'

# 4. Refresh (presenting the old refresh token again, before the new one is used, answers the same new refresh token; once the new one was used, it revokes the session)
REFRESH=$(node -pe 'JSON.parse(require("fs").readFileSync("/tmp/gw-tokens.json")).refreshToken')
curl -s -X POST ${gw}/v1/tokens/refresh ${json} -d "{\\"refreshToken\\":\\"$REFRESH\\"}" | tee /tmp/gw-tokens.json

# 5. Revoke (the access and the refresh token die together)
ACCESS=$(node -pe 'JSON.parse(require("fs").readFileSync("/tmp/gw-tokens.json")).accessToken')
curl -s -i -X POST ${gw}/v1/tokens/revoke ${json} -d "{\\"token\\":\\"$ACCESS\\",\\"type\\":\\"ACCESS_TOKEN\\"}"
curl -s -i -H "Authorization: Bearer $ACCESS" '${gw}/v1/conversations'

Ctrl-C stops the demo.
`);
}

main().catch((err: unknown) => {
  process.stderr.write(`demo: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
