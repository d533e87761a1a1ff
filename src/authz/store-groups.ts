import type { StoreUsers } from '../stores/store-users.js';
import type { Groups } from './groups.js';

/** The groups of users kept in the store, from the store; everyone else's from `groups` (the htgroup file). */
export function withStoreGroups(groups: Groups, users: StoreUsers): Groups {
  return {
    of: (user) => users.groupsOf(user) ?? groups.of(user),
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
