import { htgroupCheck } from './authz/htgroup.js';
import { inspectConfig as inspectWith, type FileCheck, type Inspection } from './config/inspection.js';
import { htpasswdCheck } from './credentials/htpasswd.js';
import { tlsCheck } from './http/tls.js';
import { assertionKeysCheck } from './identity/assertion-keys.js';
import { tokenKeysCheck } from './tokens/keys.js';

export type { Inspection };

/** Every file a configuration may name, each checked by the part that reads it. */
const FILE_CHECKS: readonly FileCheck[] = [htpasswdCheck, htgroupCheck, tokenKeysCheck, assertionKeysCheck, tlsCheck];

/** Everything a start would refuse, in one pass (see config/inspection.ts), with every part's file check. */
export function inspectConfig(file: string, env: NodeJS.ProcessEnv = process.env): Inspection {
  return inspectWith(file, FILE_CHECKS, env);
}
