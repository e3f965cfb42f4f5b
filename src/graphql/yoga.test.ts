import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { persistedOperations } from '../rest/routes.js';
import type { AppServices } from './context.js';
import { createGraphQLServer } from './yoga.js';

// Only the configuration is read while the server is made; the rest of the services serve requests.
const services = { config: loadConfig({ KB_DATA_DIR: '/nonexistent' }) } as AppServices;
const log = createLogger('silent');

describe('the persisted operations at start', () => {
  it('validates every route operation while the GraphQL server is made', () => {
    expect(() => createGraphQLServer(services, log, persistedOperations())).not.toThrow();
  });

  it('refuses to start with a persisted operation that does not validate, naming it and the problem', () => {
    const operations = new Map(persistedOperations());
    operations.set('broken-hash', parse('query Broken { noSuchField }'));
    expect(() => createGraphQLServer(services, log, operations)).toThrow(/the persisted operation broken-hash does not validate: Cannot query field "noSuchField"/);
  });
});
