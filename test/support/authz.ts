import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../src/log.js';

/** Writes an htgroup file the way editors do (a new file renamed over the old), so watchers see one change. */
export function writeGroups(dir: string, groups: Record<string, string[]>, name = 'users.groups'): string {
  const file = join(dir, name);
  const next = join(dir, `.${name}.next`);
  writeFileSync(next, Object.entries(groups).map(([g, members]) => `${g}: ${members.join(' ')}`).join('\n') + '\n');
  renameSync(next, file);
  return file;
}

export interface CapturedLog extends Logger {
  lines: Array<{ level: string; msg: string } & Record<string, unknown>>;
}

/** A logger that keeps every line (access lines included) for assertions. */
export function captureLog(): CapturedLog {
  const lines: CapturedLog['lines'] = [];
  const at = (level: string) => (msg: string, fields: Record<string, unknown> = {}) => void lines.push({ ...fields, level, msg });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

