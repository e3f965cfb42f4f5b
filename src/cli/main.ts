import { Command, InvalidArgumentError, Option } from 'commander';
import { firstAdminEmail, startApp } from '../app.js';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { openDatabase, StoreLockedError } from '../db/database.js';
import { AppError } from '../errors.js';
import { AdminChannelUnavailable, adminSocketPath, callAdminChannel } from './admin-channel.js';
import { adminCommands, type AdminCommandName } from './admin-commands.js';

const integer = (name: string) => (value: string) => {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be an integer`);
  return Number(value);
};

/** Runs an account command on the server holding the embedded store, or on the store itself. */
async function runAdminCommand(name: AdminCommandName, input: never): Promise<unknown> {
  const config = loadConfig();
  if (!config.databaseUrl) {
    try {
      return await callAdminChannel(adminSocketPath(config.dataDir), name, input);
    } catch (error) {
      if (!(error instanceof AdminChannelUnavailable)) throw error;
    }
  }
  const db = await openDatabase(config);
  try {
    return await adminCommands[name](db.prisma, input);
  } finally {
    await db.close();
  }
}

const printJson = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

async function serve(config: Config) {
  const app = await startApp(config, {
    onFirstAdmin: (rawKey) => {
      process.stdout.write(
        `Created ${firstAdminEmail} with 1000 credits. Its API key, shown only this once:\n\n  ${rawKey}\n\n`,
      );
    },
  });
  process.stdout.write(`kb listening on ${app.url} (store: ${app.db.kind === 'pglite' ? config.dataDir : 'PostgreSQL'})\n`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await app.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

const program = new Command('kb').description('Knowledge-base and agent service').showHelpAfterError();

program
  .command('serve')
  .description('run the service (embedded store under KB_DATA_DIR unless DATABASE_URL is set)')
  .action(() => serve(loadConfig()));

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
    printJson(
      await runAdminCommand('users.create', {
        email: options.email,
        name: options.name,
        phone: options.phone,
        credits: options.credits,
        plan: options.plan,
        active: !options.inactive,
      } as never),
    );
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

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof ConfigError || error instanceof AppError || error instanceof StoreLockedError) {
    process.stderr.write(`kb: ${error.message}\n`);
    process.exit(1);
  }
  throw error;
}
