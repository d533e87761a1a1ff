import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { HttpProblem } from '../http/problem.js';

/**
 * The admin listener under `server.workers`: the primary serves it, and asks every worker over the
 * cluster's IPC channel. /metrics is the sum over workers (prom-client's AggregatorRegistry.aggregate,
 * each series by its own aggregator: counters and histograms summed, store_up the minimum, the Node
 * version the first); /readyz is ready when every worker is. One scrape, all workers: a scrape that
 * reached one worker only saw that worker's counts.
 *
 * Counters and histograms never run backwards over a worker's death (Prometheus would read a fall as a
 * reset): the primary keeps each worker's last report (from every scrape, and every SNAPSHOT_EVERY_MS),
 * and when a worker dies its counters and histograms are kept and added to every later sum. What a
 * worker counted after its last report (at most SNAPSHOT_EVERY_MS' worth) dies with it. Its gauges go.
 */

const ASK = 'auth-gateway:admin-ask';
const ANSWER = 'auth-gateway:admin-answer';
/** A worker that has not answered by then is taken as not ready, and the scrape fails with 503. */
const ANSWER_TIMEOUT_MS = 2000;
/** How often the primary takes each worker's metrics between scrapes (see retire). */
const SNAPSHOT_EVERY_MS = 5000;

type Question = 'metrics' | 'ready';
interface Ask { type: typeof ASK; id: number; question: Question }
interface Answer { type: typeof ANSWER; id: number; ok: boolean; metrics?: object[]; detail?: string; worker?: number }

/** In a worker: answers the primary's questions from this worker's registry and readiness check. */
export function answerPrimary(registry: Registry, ready: () => Promise<void>): void {
  process.on('message', (m: Partial<Ask>) => {
    if (m?.type !== ASK || typeof m.id !== 'number') return;
    const id = m.id;
    const reply = (answer: Omit<Answer, 'type' | 'id'>) => {
      if (process.connected) process.send?.({ type: ANSWER, id, ...answer });
    };
    const work = m.question === 'metrics'
      ? registry.getMetricsAsJSON().then((metrics) => reply({ ok: true, metrics }))
      : ready().then(() => reply({ ok: true }));
    work.catch((err: unknown) => reply({ ok: false, detail: err instanceof HttpProblem ? err.message : 'the token store is not reachable' }));
  });
}

/** In the primary: asks the workers that listen; what the admin listener serves. */
export class WorkerQuestions {
  private next = 0;
  private readonly pending = new Map<number, { answers: Answer[]; waiting: number; done: (answers: Answer[]) => void }>();
  /** Each live worker's last metrics report. */
  private readonly last = new Map<number, object[]>();
  /** The counters and histograms of workers that died (merged into one now and then). */
  private retired: object[][] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly workers: () => Worker[]) {
    cluster.on('message', (worker: Worker, m: Partial<Answer>) => {
      if (m?.type !== ANSWER || typeof m.id !== 'number') return;
      const p = this.pending.get(m.id);
      if (!p) return;
      p.answers.push({ ...(m as Answer), worker: worker.id });
      if (--p.waiting === 0) p.done(p.answers);
    });
    this.timer = setInterval(() => void this.collect().catch(() => {}), SNAPSHOT_EVERY_MS);
    this.timer.unref();
  }

  /** The workers' metrics summed (with what dead workers counted), in the Prometheus text format. */
  async metrics(): Promise<string> {
    const reports = await this.collect();
    return AggregatorRegistry.aggregate([...reports, ...this.retired]).metrics();
  }

  /**
   * A worker died: its counters and histograms, as last reported, are kept in every later sum (so the sum
   * never decreases when its replacement starts from zero); its gauges go with it.
   */
  async retire(workerId: number): Promise<void> {
    const report = this.last.get(workerId);
    this.last.delete(workerId);
    if (!report) return;
    // At once (a scrape right after the death must count it), merged later.
    this.retired.push(report.filter((m) => ['counter', 'histogram'].includes((m as { type?: string }).type ?? '')));
    if (this.retired.length < 4) return;
    const merging = this.retired.length;
    const merged = (await AggregatorRegistry.aggregate(this.retired.slice(0, merging)).getMetricsAsJSON()) as object[];
    this.retired = [merged, ...this.retired.slice(merging)];
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Every listening worker's metrics, remembered for retire. */
  private async collect(): Promise<object[][]> {
    const answers = await this.ask('metrics');
    if (answers.some((a) => !a.ok || !a.metrics)) throw unavailable('a worker did not report its metrics; retry');
    for (const a of answers) if (a.worker !== undefined) this.last.set(a.worker, a.metrics!);
    return answers.map((a) => a.metrics!);
  }

  /** Resolves when every worker is ready; throws the 503 of the first that is not. */
  async ready(): Promise<void> {
    const answers = await this.ask('ready');
    if (answers.length === 0) throw unavailable('no worker is serving yet');
    const failed = answers.find((a) => !a.ok);
    if (failed) throw unavailable(failed.detail ?? 'a worker is not ready');
  }

  private ask(question: Question): Promise<Answer[]> {
    const workers = this.workers().filter((w) => w.isConnected());
    if (workers.length === 0) return Promise.resolve([]);
    const id = this.next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(unavailable(`a worker did not answer within ${ANSWER_TIMEOUT_MS} ms`));
      }, ANSWER_TIMEOUT_MS);
      this.pending.set(id, {
        answers: [],
        waiting: workers.length,
        done: (answers) => {
          clearTimeout(timer);
          this.pending.delete(id);
          resolve(answers);
        },
      });
      const ask: Ask = { type: ASK, id, question };
      for (const w of workers) w.send(ask);
    });
  }
}

function unavailable(detail: string): HttpProblem {
  return new HttpProblem(503, 'service_unavailable', detail, { headers: { 'Retry-After': '1' } });
}
