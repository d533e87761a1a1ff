import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { requireTool, run } from '../e2e/support/tools.js';

const ROOT = join(import.meta.dirname, '../..');
const RULES = join(ROOT, 'deploy/prometheus/rules.yml');
const TESTS = join(ROOT, 'deploy/prometheus/rules.test.yml');

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}
interface AlertTest {
  eval_time: string;
  alertname: string;
  exp_alerts: unknown[];
}

const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((g) => g.rules);
const alerts = rules.filter((r) => r.alert !== undefined);
const alertTests = (parse(readFileSync(TESTS, 'utf8')) as { tests: Array<{ alert_rule_test?: AlertTest[] }> }).tests.flatMap((t) => t.alert_rule_test ?? []);

describe('the shipped Prometheus rules (deploy/prometheus)', () => {
  it('pass `promtool check rules`', async () => {
    const promtool = requireTool('promtool');
    const checked = await run(promtool, ['check', 'rules', RULES], { timeoutMs: 20_000 });
    expect(checked.stdout + checked.stderr).toContain('SUCCESS');
    expect(checked.code).toBe(0);
  });

  it('pass their unit tests, `promtool test rules rules.test.yml`', async () => {
    const promtool = requireTool('promtool');
    const tested = await run(promtool, ['test', 'rules', TESTS], { cwd: join(ROOT, 'deploy/prometheus'), timeoutMs: 60_000 });
    expect(tested.stdout + tested.stderr).toContain('SUCCESS');
    expect(tested.code).toBe(0);
  });

  it('ship the alerts the operators asked for', () => {
    expect(alerts.map((a) => a.alert).sort()).toEqual([
      'AuthGatewayDirectoryUnavailable', 'AuthGatewayHttp2Flood', 'AuthGatewayInstanceDown', 'AuthGatewayLockoutSpike',
      'AuthGatewayProviderKeysUnavailable', 'AuthGatewayRefusingWrites', 'AuthGatewayStoreUnavailable',
      'AuthGatewayTlsReloadFailing', 'AuthGatewayUpstream5xxRatio', 'AuthGatewayUpstreamSaturated',
    ]);
    expect(rules.filter((r) => r.record !== undefined).length).toBeGreaterThanOrEqual(5);
  });

  it('test every alert both firing and quiet', () => {
    for (const { alert } of alerts) {
      const tests = alertTests.filter((t) => t.alertname === alert);
      expect(tests.some((t) => t.exp_alerts.length > 0), `${alert} fires in rules.test.yml`).toBe(true);
      expect(tests.some((t) => t.exp_alerts.length === 0), `${alert} stays quiet in rules.test.yml`).toBe(true);
    }
  });

  it('give every alert a summary, a description and a runbook link to a heading of docs/operating.md', () => {
    const doc = readFileSync(join(ROOT, 'docs/operating.md'), 'utf8');
    const anchors = new Set([...doc.matchAll(/^#{2,4} (.+)$/gm)].map((m) => m[1]!.toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-')));
    for (const a of alerts) {
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description, a.alert).toBeTruthy();
      const link = /^docs\/operating\.md#(.+)$/.exec(a.annotations?.runbook_url ?? '');
      expect(link, `${a.alert} runbook_url`).not.toBeNull();
      expect(anchors.has(link![1]!), `${a.alert}: #${link![1]} is a heading of docs/operating.md`).toBe(true);
    }
  });
});
