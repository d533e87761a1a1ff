import type { Clock } from '../clock.js';
import type { Config } from '../config/types.js';
import type { Logger } from '../log.js';
import { ApiKeys, type ApiKeyRecord } from './tables/api-keys.js';
import { createTable } from './kinds.js';
import { StoreUsers, type StoreUser } from './tables/store-users.js';

/** The credentials kept in the store's tables, as the configuration at start asks for them. */
export interface StoreCredentials {
  apiKeys: ApiKeys | undefined;
  /** Users kept in the store (users.store), mirrored in this process. */
  storeUsers: StoreUsers | undefined;
  close(): Promise<void>;
}

export function storeCredentials(config: Config, clock: Clock, log: Logger): StoreCredentials {
  const apiKeys = config.apiKeys ? new ApiKeys(createTable<ApiKeyRecord>('apikeys', config.store, log), () => clock.now()) : undefined;
  const storeUsers = config.users.store ? new StoreUsers(createTable<StoreUser>('users', config.store, log), log, () => clock.now()) : undefined;
  storeUsers?.start();
  return {
    apiKeys,
    storeUsers,
    close: async () => {
      await apiKeys?.table.close();
      await storeUsers?.close();
      await storeUsers?.table.close();
    },
  };
}
