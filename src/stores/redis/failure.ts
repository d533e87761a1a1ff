import { DeadlineError } from './deadline.js';

/** Why a store command failed, in the words an operator searches for. */
export type FailureCause = 'MOVED' | 'ASK' | 'READONLY' | 'CLUSTERDOWN' | 'NOREPLICAS' | 'LOADING' | 'timeout' | 'refused' | 'connection' | 'other';

export function failureCause(err: unknown): FailureCause {
  const e = err as { message?: string; code?: string; cause?: unknown; lastNodeError?: unknown } | undefined;
  const message = String(e?.message ?? err);
  for (const word of ['MOVED', 'ASK', 'READONLY', 'CLUSTERDOWN', 'NOREPLICAS', 'LOADING'] as const) {
    if (message.startsWith(word) || message.includes(` ${word} `) || message.includes(`error: ${word}`)) return word;
  }
  if (err instanceof DeadlineError || /timed out|ETIMEDOUT/.test(message)) return 'timeout';
  if (e?.code === 'ECONNREFUSED' || message.includes('ECONNREFUSED')) return 'refused';
  if (/Connection is closed|Stream isn't writeable|ECONNRESET|EPIPE|isn't ready|Too many Cluster redirections|None of startup nodes|All sentinels are unreachable|No subscriber/.test(message)) {
    // A redirection loop ends in "Too many Cluster redirections. Last error: MOVED ..." (caught above when present).
    return 'connection';
  }
  if (e?.cause !== undefined && e.cause !== err) return failureCause(e.cause);
  if (e?.lastNodeError !== undefined) return failureCause(e.lastNodeError);
  return 'other';
}
