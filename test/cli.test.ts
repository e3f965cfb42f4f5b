import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kb as runKb, serve, stop } from './support/cli.js';
import { benchPdfDirectory } from './support/documents.js';
import { createOwnDatabase, migratedDataDir } from './support/server.js';

const allScopes = ['user:read', 'user:write', 'kb:read', 'kb:write', 'chat:read', 'chat:write'];

let dataDir: string;
let database: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-cli-');
  // On PostgreSQL a database of this file's own: a server on the suite's shared one would take
  // other files' jobs and, stopped with SIGTERM, wait for them to finish.
  if (process.env.DATABASE_URL) database = await createOwnDatabase(process.env.DATABASE_URL);
});
afterAll(async () => {
  await database?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

/** The configured store (a database of its own, when the suite runs on PostgreSQL) unless overridden. */
function environment(overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, KB_DATA_DIR: dataDir, KB_LOG_LEVEL: 'error', ...(database && { DATABASE_URL: database.url }), ...overrides };
}

const kb = (args: string[], env = environment()) => runKb(args, env);

const email = () => `cli-${randomUUID()}@example.com`;

// Each test runs `kb` several times, and each run starts Node and opens the store (the embedded
// one starts PostgreSQL in WebAssembly): about 2 s on two idle cores, five times that beside the
// other test files of a CI leg.
const runsKb = { timeout: 120_000 };

describe('kb account commands on the store directly', runsKb, () => {
  it('creates a user with a key carrying all six scopes, grants credits and sets the subscription', async () => {
    const address = email();
    const created = await kb(['users', 'create', '--email', address, '--name', 'Cli User', '--phone', '+14155550100', '--credits', '5', '--plan', 'pro']);
    expect(created.code, created.stderr).toBe(0);
    const output = JSON.parse(created.stdout);
    expect(output.user).toMatchObject({ email: address, name: 'Cli User', phone: '+14155550100', creditsBalance: 5 });
    expect(output.user.created_at).toMatch(/Z$/);
    expect(output.api_key).toMatchObject({ name: 'default', scopes: allScopes });
    expect(output.api_key.raw_key).toMatch(/^sk_[0-9A-Za-z]{32,}$/);
    expect(Object.keys(output.api_key).sort()).toEqual(['display_key', 'id', 'name', 'raw_key', 'scopes']);

    const granted = await kb(['credits', 'grant', '--email', address, '--amount', '10', '--reason', 'welcome']);
    expect(granted.code, granted.stderr).toBe(0);
    expect(JSON.parse(granted.stdout)).toMatchObject({ balance: 15 });

    const subscription = await kb(['subscription', 'set', '--email', address, '--status', 'inactive']);
    expect(subscription.code, subscription.stderr).toBe(0);
    expect(JSON.parse(subscription.stdout)).toMatchObject({ status: 'inactive', plan: 'pro' });
  });

  it('fails with a clear message and exit code for bad input', async () => {
    const address = email();
    expect((await kb(['users', 'create', '--email', address, '--name', 'Dup'])).code).toBe(0);
    const duplicate = await kb(['users', 'create', '--email', address, '--name', 'Dup']);
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain('already exists');

    const badPhone = await kb(['users', 'create', '--email', email(), '--name', 'P', '--phone', '555']);
    expect(badPhone.code).toBe(1);
    expect(badPhone.stderr).toContain('phone');

    const badAmount = await kb(['credits', 'grant', '--email', address, '--amount', 'lots']);
    expect(badAmount.code).not.toBe(0);
    expect(badAmount.stderr).toContain('--amount');

    const unknownUser = await kb(['credits', 'grant', '--email', email(), '--amount', '1']);
    expect(unknownUser.code).toBe(1);
    expect(unknownUser.stderr).toContain('not found');

    const badStatus = await kb(['subscription', 'set', '--email', address, '--status', 'paused']);
    expect(badStatus.code).not.toBe(0);
    expect(badStatus.stderr).toContain('paused');
  });

  it('refuses a bad configuration, naming every problem', async () => {
    const result = await kb(['serve'], environment({ PORT: 'eighty', KB_AGENT_COST_FAST: '-1' }));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PORT');
    expect(result.stderr).toContain('KB_AGENT_COST_FAST');

    // Roles and KB_MIGRATE=off need PostgreSQL; a database that cannot be opened is said in a line.
    for (const [variables, message] of [
      [{ KB_ROLE: 'worker', DATABASE_URL: '' }, 'KB_ROLE: worker needs DATABASE_URL'],
      [{ KB_MIGRATE: 'off', DATABASE_URL: '' }, 'KB_MIGRATE: off needs DATABASE_URL'],
      [{ DATABASE_URL: 'postgresql://kb@127.0.0.1:1/kb' }, 'kb: cannot open the PostgreSQL database of DATABASE_URL: connect ECONNREFUSED 127.0.0.1:1'],
    ] as const) {
      const refused = await kb(['serve'], environment(variables));
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(message);
      expect(refused.stderr).not.toContain('    at ');
    }
    const worker = await kb(['worker'], environment({ DATABASE_URL: '' }));
    expect(worker.code).toBe(1);
    expect(worker.stderr).toContain('KB_ROLE: worker needs DATABASE_URL');
  });
});

describe('kb account commands while kb serve holds the store', runsKb, () => {
  it('go through the running server, whose API accepts the new key at once', async () => {
    const server = await serve(environment());
    try {
      const address = email();
      const created = await kb(['users', 'create', '--email', address, '--name', 'Live', '--credits', '3']);
      expect(created.code, created.stderr).toBe(0);
      const { api_key: apiKey } = JSON.parse(created.stdout);
      const me = await fetch(`${server.url}/v1/user/me`, { headers: { authorization: `Bearer ${apiKey.raw_key}` } });
      expect(await me.json()).toMatchObject({ email: address, creditsBalance: 3 });

      const granted = await kb(['credits', 'grant', '--email', address, '--amount', '4']);
      expect(JSON.parse(granted.stdout)).toMatchObject({ balance: 7 });
      const credits = await fetch(`${server.url}/v1/user/me/credits`, { headers: { authorization: `Bearer ${apiKey.raw_key}` } });
      expect(await credits.json()).toMatchObject({ balance: 7, totals: { granted: 7, used: 0 } });
    } finally {
      await stop(server.child);
    }
  });
});

describe('kb import', runsKb, () => {
  it('uploads files and directories to a workspace by name, waits for processing and prints a summary', async () => {
    const server = await serve(environment());
    const folder = await mkdtemp(path.join(tmpdir(), 'kb-import-'));
    try {
      const created = await kb(['users', 'create', '--email', email(), '--name', 'Importer']);
      const key = JSON.parse(created.stdout).api_key.raw_key as string;
      const workspace = await fetch(`${server.url}/v1/kb/workspaces`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Imported' }),
      }).then((response) => response.json());
      await mkdir(path.join(folder, 'nested'));
      await writeFile(path.join(folder, 'a.md'), '# A\n\nfirst file');
      await writeFile(path.join(folder, 'nested', 'b.txt'), 'second file');
      await writeFile(path.join(folder, '.hidden.txt'), 'skipped');
      await writeFile(path.join(folder, 'junk.txt'), Buffer.from([0, 1, 2, 3, 255, 254]));
      await copyFile(path.join(benchPdfDirectory, 'sample_pdf_2.pdf'), path.join(folder, 'report.pdf'));

      const result = await kb(['import', folder, '--workspace', 'imported', '--url', server.url, '--key', key]);
      const summary = JSON.parse(result.stdout);
      expect(summary).toMatchObject({ workspace: { id: workspace.id }, ready: 3, failed: 0, rejected: 1, pages: 4 });
      expect(summary.failures).toEqual([{ file: path.join(folder, 'junk.txt'), reason: expect.stringContaining('unsupported') }]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('process');

      const missing = await kb(['import', folder, '--workspace', 'no such workspace', '--url', server.url, '--key', key]);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('no workspace');
    } finally {
      await stop(server.child);
      await rm(folder, { recursive: true, force: true });
    }
  });
});

// Each test starts kb serve on a new store at least twice (initdb, migrations, the model's
// threads): 20-30 s under CI's load, against vitest's default of 30 s.
