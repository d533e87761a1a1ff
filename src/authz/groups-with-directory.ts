import type { UserSources } from '../credentials/user-sources.js';
import type { Groups } from './groups.js';

/**
 * The groups of the htgroup file and, for a directory user, the groups the directory gave it (the
 * groups read with its last bind or lookup on this instance), together: what the allow rules and the
 * periodic check of open tunnels read. A name in the htpasswd file has the file's groups only.
 */
export class DirectoryGroups implements Groups {
  constructor(readonly file: Groups, private readonly users: UserSources) {}

  of(user: string): readonly string[] {
    const fromFile = this.file.of(user);
    if (!this.users.inDirectory(user)) return fromFile;
    return union(fromFile, this.users.directory!.groupsOf(user) ?? []);
  }

  onChange(listener: () => void): () => void {
    return this.file.onChange(listener);
  }
}

/** The file's groups of a runtime's groups (the same object without a directory). */
export function fileGroupsOf(groups: Groups): Groups {
  return groups instanceof DirectoryGroups ? groups.file : groups;
}

export function union(a: readonly string[], b: readonly string[]): readonly string[] {
  if (b.length === 0) return a;
  if (a.length === 0) return b;
  return Object.freeze([...new Set([...a, ...b])].sort());
}
