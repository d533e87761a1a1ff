import type { StoreUsers } from '../stores/tables/store-users.js';
import type { Groups } from './groups.js';

/**
 * The groups of users kept in the store, from the store; everyone else's from `groups` (the htgroup
 * file). A name of the users file (`inFile`) is the file's user even when the store has it too (the
 * store's entry is refused at load, see Credentials.follow): it gets the file's groups, never the
 * store's. Without `inFile` no name is taken for the file's: pass it (see allowGroupsFor).
 */
function withStoreGroups(groups: Groups, users: StoreUsers, inFile: (user: string) => boolean = () => false): Groups {
  return {
    of: (user) => (inFile(user) ? undefined : users.groupsOf(user)) ?? groups.of(user),
    onChange: (listener) => {
      const offFile = groups.onChange(listener);
      const offStore = users.onChange(listener);
      return () => {
        offFile();
        offStore();
      };
    },
  };
}

/**
 * What the allow rules read: with users in the store (`users.store`), the store's groups for the
 * store's names that are not in the users file (`credentials.inFile`, read at each call: a reload of
 * the file counts at once); without, `groups` as they are.
 */
export function allowGroupsFor(groups: Groups, storeUsers: StoreUsers | undefined, credentials: { inFile(user: string): boolean }): Groups {
  return storeUsers ? withStoreGroups(groups, storeUsers, (user) => credentials.inFile(user)) : groups;
}
