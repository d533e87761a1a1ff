import { describe, expect, it } from 'vitest';
import { inspectConfigText } from '../../src/config/load.js';

/**
 * A setting of an earlier release that was renamed or retired keeps working, with a warning that says
 * what to write instead, for at least one release: an operator's file must not stop the gateway from
 * starting after an upgrade.
 */
const ENV = { JWT_SECRET: 's'.repeat(40) };
const file = (lockout: string) => `
users: { htpasswd: users.htpasswd }
tokens: { signing: { alg: HS256, secret: "\${JWT_SECRET}" } }
upstreams: { up: { url: "http://127.0.0.1:9001" } }
routes: [{ path: /v1/x, upstream: up }]
lockout: ${lockout}
`;

describe('retired settings', () => {
  it('lockout.maxFailuresPerAddress loads, read as addressBurst, with a warning naming what to write', () => {
    const { config, problems, warnings } = inspectConfigText(file('{ maxFailuresPerUser: 5, maxFailuresPerAddress: 40 }'), '/etc/gw/gateway.yaml', ENV);
    expect(problems).toEqual([]);
    expect(config!.lockout).toEqual({ maxFailuresPerUser: 5, maxFailuresPerAccount: 100, windowSeconds: 900, addressBurst: 40, addressFailuresPerMinute: 30 });
    expect(warnings).toEqual([expect.stringMatching(/^lockout\.maxFailuresPerAddress \(line 6\) is retired .*read as lockout\.addressBurst: 40; write addressBurst: 40 instead/)]);
  });

  it('beside addressBurst it is ignored, and the warning says to remove it', () => {
    const { config, problems, warnings } = inspectConfigText(file('{ addressBurst: 7, maxFailuresPerAddress: 40 }'), '/etc/gw/gateway.yaml', ENV);
    expect(problems).toEqual([]);
    expect(config!.lockout.addressBurst).toBe(7);
    expect(warnings).toEqual([expect.stringMatching(/is retired .*ignored, since lockout\.addressBurst is set; remove it/)]);
  });

  it('a value that is no count is still a problem', () => {
    const { problems } = inspectConfigText(file('{ maxFailuresPerAddress: many }'), '/etc/gw/gateway.yaml', ENV);
    expect(problems).toEqual([expect.stringMatching(/^lockout\.maxFailuresPerAddress /)]);
  });
});
