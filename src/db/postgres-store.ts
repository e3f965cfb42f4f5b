import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pgListen from 'pg-listen';
import type { Logger } from '../logger.js';
import type { Database, StoreSignals } from './database.js';
import { StoreOpenError, storeUnavailable } from './store-errors.js';
import { openWithPool } from './store-pool.js';

/** The advisory lock class of process names (with the name's hashtext as the second key). */
const instanceLockClass = 0x6b62_696e;
/** How often a process whose name's connection was lost tries to hold its name again. */
const instanceReclaimMs = 5_000;
/**
 * The name's connection says it is alive this often, and PostgreSQL ends it after this long
 * without a word (`idle_session_timeout`): a process on a host that died, whose connection
 * PostgreSQL would otherwise keep open for hours, frees its name within the timeout.
 */
const instanceHeartbeatMs = 10_000;
const instanceIdleTimeout = '30s';

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
  const instanceHold = holdInstance(url, logger);
  const database = await openWithPool('postgres', pool, { migrate }, async () => {
    closed = true;
    await instanceHold.release();
    if (listening) await subscriber.close().catch(() => {});
  }).catch((error: unknown) => {
    // No such database, refused credentials, no server: the operator's to fix, said in a line.
    const code = (error as { code?: unknown }).code;
    if (storeUnavailable(error) || code === '3D000' || code === 'ENOTFOUND' || (typeof code === 'string' && code.startsWith('28'))) {
      throw new StoreOpenError(`cannot open the PostgreSQL database of DATABASE_URL: ${(error as Error).message}`);
    }
    throw error;
  });
  return { ...database, signals, claimInstance: instanceHold.claim };
}

/**
 * A process's name (KB_INSTANCE) held on a connection of its own by a session advisory lock:
 * two processes of one name would take each other's graphql-sse streams (stream-routing.ts). The
 * lock goes with the connection, so a process that dies, even by `kill -9`, frees its name
 * as soon as PostgreSQL sees the connection close, and one that stops answering (a host lost, a
 * process frozen) within `instanceIdleTimeout`. A connection lost while the process lives is
 * opened again and the name taken again; the log says if another process took it meanwhile.
 */
function holdInstance(url: string, logger: Logger | undefined) {
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  let released = false;
  let reportedTaken = false;
  const connect = async (instance: string): Promise<boolean> => {
    const connection = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000, keepAlive: true });
    connection.on('error', () => undefined);
    await connection.connect();
    const { rows } = await connection.query<{ held: boolean }>('SELECT pg_try_advisory_lock($1::int4, hashtext($2)) AS held', [instanceLockClass, instance]);
    if (!rows[0]?.held || released) {
      await connection.end().catch(() => {});
      return false;
    }
    // PostgreSQL 14 and later; an older server keeps a lost process's name until its TCP keepalive ends the connection.
    await connection.query(`SET idle_session_timeout = '${instanceIdleTimeout}'`).catch(() => undefined);
    client = connection;
    clearInterval(heartbeat);
    heartbeat = setInterval(() => connection.query('SELECT 1').catch(() => undefined), instanceHeartbeatMs);
    heartbeat.unref();
    connection.once('end', () => {
      if (client !== connection || released) return;
      client = undefined;
      clearInterval(heartbeat);
      logger?.info(`PostgreSQL: the connection holding this process's name (KB_INSTANCE=${instance}) was lost; taking it again`);
      reclaim(instance);
    });
    return true;
  };
  const reclaim = (instance: string) => {
    retry = setTimeout(() => {
      connect(instance).then(
        (held) => {
          if (held) {
            reportedTaken = false;
            logger?.info(`PostgreSQL: this process holds its name (KB_INSTANCE=${instance}) again`);
          } else if (!released) {
            if (!reportedTaken) logger?.info(`PostgreSQL: another process now holds KB_INSTANCE=${instance}; graphql-sse streams cannot be routed to this one until it is restarted with a name of its own`);
            reportedTaken = true;
            reclaim(instance);
          }
        },
        () => reclaim(instance),
      );
    }, instanceReclaimMs);
    retry.unref();
  };
  return {
    async claim(instance: string) {
      if (!(await connect(instance))) {
        throw new StoreOpenError(`another process on this database is named KB_INSTANCE=${instance}: give each process a name of its own (docs/deployment.md)`);
      }
    },
    async release() {
      released = true;
      clearTimeout(retry);
      clearInterval(heartbeat);
      await client?.end().catch(() => {});
      client = undefined;
    },
  };
}
