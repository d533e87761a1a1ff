import type { AllowConfig } from '../config/types.js';

/** A route's allow rule, compiled for lookups: sets, upper-case methods. */
export interface AllowRule {
  /** undefined: any authenticated user passes the identity part (only `methods` was given). */
  readonly users: ReadonlySet<string> | undefined;
  readonly groups: ReadonlySet<string> | undefined;
  /** undefined: every method. */
  readonly methods: ReadonlySet<string> | undefined;
}

/** What an allow rule is judged against. */
export interface Subject {
  user: string;
  groups: readonly string[];
}

export type AllowDecision = { allowed: true } | { allowed: false; detail: string };

const ALLOWED: AllowDecision = Object.freeze({ allowed: true });

export function compileAllow(config: AllowConfig): AllowRule {
  const identity = config.users !== undefined || config.groups !== undefined;
  return {
    users: identity ? new Set(config.users ?? []) : undefined,
    groups: identity ? new Set(config.groups ?? []) : undefined,
    methods: config.methods ? new Set(config.methods.map((m) => m.toUpperCase())) : undefined,
  };
}

/**
 * The allow rule of a route, as a pure function: no rule passes every authenticated user (as before
 * rules existed); a rule passes a user listed in `users` or in one of `groups`, and, when `methods` is
 * given, a method listed there. HEAD is not implied by GET: list both. The detail names what failed,
 * never who would have passed.
 */
export function decide(rule: AllowRule | undefined, subject: Subject, method: string): AllowDecision {
  if (!rule) return ALLOWED;
  if (rule.users && rule.groups && !rule.users.has(subject.user) && !subject.groups.some((g) => rule.groups!.has(g))) {
    return { allowed: false, detail: 'this route is not open to this user' };
  }
  if (rule.methods && !rule.methods.has(method.toUpperCase())) {
    return { allowed: false, detail: `this route does not allow ${method} for this user` };
  }
  return ALLOWED;
}
