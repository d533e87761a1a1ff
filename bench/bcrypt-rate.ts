// The raw bcrypt rate: bcrypt `verify` (src/credentials/bcrypt.ts) of a cost-10 hash, `concurrency` calls in flight on the
// libuv thread pool (the same pool size the gateway gets), for `duration` seconds.
// Usage: node bcrypt-rate.js '{"concurrency":32,"duration":5,"cost":10}'; prints {verifies,durationS,rate}.
import { hashSync, verify } from '../src/credentials/bcrypt.js';
import { performance } from 'node:perf_hooks';

interface Spec {
  concurrency: number;
  duration: number;
  cost: number;
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as Spec;
  const password = 'raw-bcrypt-rate-password';
  const hash = hashSync(password, { cost: spec.cost });
  let verifies = 0;
  const start = performance.now();
  const deadline = start + spec.duration * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      if (!(await verify(password, hash))) throw new Error('verify returned false');
      verifies++;
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  const durationS = (performance.now() - start) / 1000;
  process.stdout.write(`${JSON.stringify({ verifies, durationS, rate: verifies / durationS, threadPool: Number(process.env.UV_THREADPOOL_SIZE ?? 4) })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
