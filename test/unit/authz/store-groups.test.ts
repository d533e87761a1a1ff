import { describe, expect, it } from 'vitest';
import { compileAllow, decide } from '../../../src/authz/allow-rule.js';
import { allowGroupsFor } from '../../../src/authz/store-groups.js';
import { systemClock } from '../../../src/clock.js';
import { hashSync } from '../../../src/credentials/bcrypt.js';
import { Credentials } from '../../../src/credentials/credentials.js';
import { silentLogger } from '../../../src/log.js';
import { MemoryTable } from '../../../src/stores/tables/shared-table.js';
import { StoreUsers, type StoreUser } from '../../../src/stores/tables/store-users.js';
import { htpasswd, testConfig } from '../../support/fixtures.js';
import { waitUntil } from '../../support/poll.js';

// A name in both the users file and the store is the file's user (its line stays in force, the store's
// entry is refused): the store's groups must not reach it, or the file's password would carry them.


describe('store groups beside the users file', () => {
  it('a store user named like a file user gives the file user none of its groups; other store users keep theirs', async () => {
    const file = htpasswd({ carol: 'carol-file-pw', dave: 'dave-pw' });
    const store = new StoreUsers(new MemoryTable<StoreUser>(), silentLogger);
    const credentials = new Credentials(testConfig(file.file, { users: { htpasswd: file.file, watch: false, store: true } }).users, systemClock, silentLogger);
    try {
      await store.add('carol', hashSync('carol-store-pw', { cost: 4 }), ['admins']);
      await store.add('erin', hashSync('erin-pw', { cost: 4 }), ['admins']);
      store.start();
      await waitUntil(() => store.ready && store.users().size === 2);
      credentials.follow(store);
      // The file's carol is the one who signs in (the store's carol is refused from the store).
      expect(await credentials.verifier.verify('carol', 'carol-file-pw')).toBe(true);
      expect(await credentials.verifier.verify('carol', 'carol-store-pw')).toBe(false);

      const groups = allowGroupsFor({ of: (user) => (user === 'dave' ? ['ops'] : []), onChange: () => () => {} }, store, credentials);
      const admins = compileAllow({ groups: ['admins'] });
      expect(groups.of('carol')).toEqual([]);
      expect(decide(admins, { user: 'carol', groups: groups.of('carol') }, 'GET').allowed).toBe(false);
      // The store's own users and the file's other users are unchanged.
      expect(groups.of('erin')).toEqual(['admins']);
      expect(decide(admins, { user: 'erin', groups: groups.of('erin') }, 'GET').allowed).toBe(true);
      expect(groups.of('dave')).toEqual(['ops']);

      // carol leaves the file: from the next read on she is the store's user, with the store's groups.
      file.write({ dave: 'dave-pw' });
      expect(credentials.reload()).toBe(true);
      expect(groups.of('carol')).toEqual(['admins']);
    } finally {
      credentials.close();
      await store.close();
      file.remove();
    }
  });

  it('without users in the store, the groups are those given', () => {
    const given = { of: () => ['ops'], onChange: () => () => {} };
    expect(allowGroupsFor(given, undefined, { inFile: () => false })).toBe(given);
  });
});
