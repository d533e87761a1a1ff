import { describe, expect, it } from 'vitest';
import { compileAllow, decide } from '../../../src/authz/allow-rule.js';

const alice = { user: 'alice', groups: [] };
const bob = { user: 'bob', groups: ['admins', 'ops'] };
const carol = { user: 'carol', groups: ['staff'] };

describe('allow rules', () => {
  it.each([
    ['no rule: every authenticated user, every method', undefined, carol, 'DELETE', true],
    ['a listed user', { users: ['alice'] }, alice, 'GET', true],
    ['an unlisted user', { users: ['alice'] }, carol, 'GET', false],
    ['a member of a listed group', { groups: ['admins'] }, bob, 'GET', true],
    ['in no listed group', { groups: ['admins'] }, carol, 'GET', false],
    ['users or groups: the user', { users: ['alice'], groups: ['admins'] }, alice, 'GET', true],
    ['users or groups: the group', { users: ['alice'], groups: ['admins'] }, bob, 'GET', true],
    ['users or groups: neither', { users: ['alice'], groups: ['admins'] }, carol, 'GET', false],
    ['methods only: anyone, listed method', { methods: ['GET', 'HEAD'] }, carol, 'HEAD', true],
    ['methods only: anyone, other method', { methods: ['GET', 'HEAD'] }, carol, 'POST', false],
    ['HEAD is not implied by GET', { methods: ['GET'] }, carol, 'HEAD', false],
    ['listed user, method not listed', { users: ['alice'], methods: ['GET'] }, alice, 'DELETE', false],
    ['unlisted user, listed method', { users: ['alice'], methods: ['GET'] }, carol, 'GET', false],
    ['a group named like the user does not count as the user', { users: ['admins'] }, bob, 'GET', false],
  ] as const)('%s', (_name, config, subject, method, expected) => {
    const rule = config ? compileAllow({ ...config } as never) : undefined;
    expect(decide(rule, subject, method).allowed).toBe(expected);
  });

  it('says what failed without naming who would pass', () => {
    const rule = compileAllow({ users: ['alice'], methods: ['GET'] });
    const who = decide(rule, carol, 'GET');
    const how = decide(rule, alice, 'POST');
    expect(who).toEqual({ allowed: false, detail: 'this route is not open to this user' });
    expect(how).toEqual({ allowed: false, detail: 'this route does not allow POST for this user' });
  });
});
