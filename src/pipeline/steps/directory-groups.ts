import type { Groups } from '../../authz/groups.js';
import { union } from '../../authz/groups-with-directory.js';
import type { UserSources } from '../../credentials/user-sources.js';
import type { GatewayExchange } from '../../http/state.js';

/**
 * Before the allow step, with users.ldap: a principal of a directory user gets its groups as the
 * directory has them (those read with its bind moments ago at once; a Bearer request's, read again
 * when older than cacheSeconds, over the service connection), with the htgroup file's. A user gone from
 * the directory gets 401; a directory that cannot answer, the groups read before or 503. A principal
 * whose source set its groups, and names of the htpasswd file, pass untouched.
 */
export function directoryGroups(users: UserSources, file: Groups): (ex: GatewayExchange) => void | Promise<void> {
  const directory = users.directory!;
  return function readDirectoryGroups(ex) {
    const principal = ex.principal!;
    if (principal.groups !== undefined || !users.inDirectory(principal.user)) return undefined;
    const groups = directory.groupsNow(principal.user);
    if (!(groups instanceof Promise)) {
      principal.groups = union(file.of(principal.user), groups);
      return undefined;
    }
    return groups.then((g) => {
      principal.groups = union(file.of(principal.user), g);
    });
  };
}
