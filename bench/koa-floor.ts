// The framework reference: the floor (bare http-proxy, same keep-alive agent, same error listener)
// behind a Koa 3 app with one middleware and no auth. Between it and the floor is what Koa costs;
// between it and the gateway is what the gateway's own chain costs.
// Usage: node koa-floor.js http://127.0.0.1:UPSTREAM_PORT ; prints {"port":N} once listening.
import Koa from 'koa';
import { announce, passthroughProxy } from './passthrough.js';

const target = process.argv[2];
if (!target) throw new Error('usage: koa-floor.js UPSTREAM_URL');
const proxy = passthroughProxy(target);

const app = new Koa();
app.use((ctx) => {
  // http-proxy writes the response itself; the promise keeps Koa's middleware frame open until the
  // response is over, as a gateway middleware that forwards would.
  ctx.respond = false;
  return new Promise<void>((resolve) => {
    ctx.res.once('close', resolve);
    proxy.web(ctx.req, ctx.res);
  });
});
const server = app.listen(0, '127.0.0.1', () => announce(server));
