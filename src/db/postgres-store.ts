import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pgListen from 'pg-listen';
import type { Logger } from '../logger.js';
import type { Database, StoreSignals } from './database.js';
import { StoreOpenError, storeUnavailable } from './store-errors.js';
import { openWithPool } from './store-pool.js';

export async function openPostgres(url: string, logger: Logger | undefined, migrate: boolean): Promise<Database> {
  // A server that does not answer (a host gone, a network partition) fails a connection attempt
  // after 5 s, and the request answers 503, rather than after the system's TCP timeout of minutes.
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5_000 });
  // An idle connection the server ends (a restart, an administrator) is an 'error' event on the
  // pool, which would end the process if nothing listened. The pool drops that connection and
  // opens another when asked; requests meanwhile get 503 (store-errors.ts).
  pool.on('error', (error) => logger?.info(`PostgreSQL closed an idle connection: ${error.message}`));
  // One connection of its own listens; it reconnects after an outage however long, and listens again.
  // pg-listen is CommonJS with its function as `exports.default`.
  const subscriber = pgListen.default(
    { connectionString: url },
    { retryTimeout: 0, retryInterval: (attempt) => Math.min(10_000, 250 * 2 ** attempt), paranoidChecking: 30_000 },
  );
  const afterReconnect = new Set<() => void>();
  // A process tells itself directly: its own signals, which PostgreSQL delivers to it too, are dropped.
  const sender = randomUUID();
  let closed = false;
  subscriber.events.on('error', (error) => logger?.info(`PostgreSQL signals: ${error.message}`));
  subscriber.events.on('reconnect', (attempt) => {
    if (attempt === 1) logger?.info('PostgreSQL signals: the listening connection was lost; reconnecting');
  });
  subscriber.events.on('connected', () => {
    // A reconnection that was under way when the store closed ends the connection it made.
    if (closed) subscriber.close().catch(() => {});
    else for (const onSignal of afterReconnect) onSignal();
  });
  let listening: Promise<void> | undefined;
  const signals: StoreSignals = {
    send(channel, message) {
      pool.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ sender, message })]).catch(() => {});
    },
    async listen(channel, onSignal) {
      subscriber.notifications.on(channel, (payload: { sender?: string; message?: string } | undefined) => {
        if (payload?.sender !== sender) onSignal(payload?.message);
      });
      // A first connection that fails is not tried again: the queue finds work by polling then.
      listening ??= subscriber.connect();
      await listening;
      await subscriber.listenTo(channel);
      // After the first connection: its own 'connected' missed nothing.
      afterReconnect.add(() => onSignal(undefined));
    },
  };
  const database = await openWithPool('postgres', pool, { migrate }, async () => {
    closed = true;
    if (listening) await subscriber.close().catch(() => {});
  }).catch((error: unknown) => {
    // No such database, refused credentials, no server: the operator's to fix, said in a line.
    const code = (error as { code?: unknown }).code;
    if (storeUnavailable(error) || code === '3D000' || code === 'ENOTFOUND' || (typeof code === 'string' && code.startsWith('28'))) {
      throw new StoreOpenError(`cannot open the PostgreSQL database of DATABASE_URL: ${(error as Error).message}`);
    }
    throw error;
  });
  return { ...database, signals };
}
