import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunning, kb as runKb, serve, stop } from './support/cli.js';
import { benchPdfDirectory } from './support/documents.js';

const allScopes = ['user:read', 'user:write', 'kb:read', 'kb:write', 'chat:read', 'chat:write'];

let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-cli-'));
});
afterAll(() => rm(dataDir, { recursive: true, force: true }));

/** The configured store (DATABASE_URL, when the suite runs on PostgreSQL) unless overridden. */
function environment(overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, KB_DATA_DIR: dataDir, KB_LOG_LEVEL: 'error', ...overrides };
}

const kb = (args: string[], env = environment()) => runKb(args, env);

const email = () => `cli-${randomUUID()}@example.com`;

describe('kb account commands on the store directly', () => {
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
  });
});

describe('kb account commands while kb serve holds the store', () => {
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

describe('kb import', () => {
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
describe('first start on an empty embedded store', { timeout: 120_000 }, () => {
  it('creates admin@localhost with 1,000 credits and prints its key once', async () => {
    const emptyDir = await mkdtemp(path.join(tmpdir(), 'kb-first-'));
    const env = environment({ KB_DATA_DIR: emptyDir, DATABASE_URL: '' });
    try {
      const first = await serve(env);
      const key = /(sk_[0-9A-Za-z]{32,})/.exec(first.output())?.[1];
      expect(key).toBeDefined();
      const me = await fetch(`${first.url}/v1/user/me`, { headers: { authorization: `Bearer ${key}` } });
      expect(await me.json()).toMatchObject({ email: 'admin@localhost', creditsBalance: 1000 });
      await stop(first.child);

      const second = await serve(env);
      expect(second.output()).not.toMatch(/sk_[0-9A-Za-z]{32,}/);
      const again = await fetch(`${second.url}/v1/user/me`, { headers: { authorization: `Bearer ${key}` } });
      expect(again.status).toBe(200);
      await stop(second.child);
    } finally {
      await rm(emptyDir, { recursive: true, force: true });
    }
  });

  it('stops at once, saying how to get it, when the model is missing, and keeps the admin key for a start that works', async () => {
    const emptyDir = await mkdtemp(path.join(tmpdir(), 'kb-nomodel-'));
    const env = environment({ KB_DATA_DIR: emptyDir, DATABASE_URL: '' });
    try {
      const refused = await kb(['serve'], { ...env, PORT: '0', KB_MODELS_DIR: path.join(emptyDir, 'no-models') });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^kb: The embedded model bge-small-en-v1\.5-q is not usable: .*model\.onnx is missing.*kb models pull/);
      expect(refused.stdout).not.toMatch(/sk_/);
      const started = await serve(env);
      expect(started.output()).toMatch(/Created admin@localhost with 1000 credits[\s\S]*sk_[0-9A-Za-z]{32,}/);
      await stop(started.child);
    } finally {
      await rm(emptyDir, { recursive: true, force: true });
    }
  });

  it('refuses a corrupt model, and kb models pull replaces it with the verified one', async () => {
    const models = await mkdtemp(path.join(tmpdir(), 'kb-models-'));
    const env = environment({ KB_DATA_DIR: path.join(models, 'data'), DATABASE_URL: '', KB_MODELS_DIR: models });
    try {
      await mkdir(path.join(models, 'bge-small-en-v1.5-q'));
      const provisioned = fileURLToPath(new URL('../models/bge-small-en-v1.5-q/', import.meta.url));
      for (const file of ['model.onnx', 'tokenizer.json']) await copyFile(path.join(provisioned, file), path.join(models, 'bge-small-en-v1.5-q', file));
      await writeFile(path.join(models, 'bge-small-en-v1.5-q', 'tokenizer.json'), '{"tampered": true}');
      const refused = await kb(['serve'], { ...env, PORT: '0' });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/tokenizer\.json .*(sha256|checksum)|tokenizer\.json.*does not match/);
      const pulled = await kb(['models', 'pull'], env);
      expect(pulled.code, pulled.stderr).toBe(0);
      expect(pulled.stderr).toContain('bge-small-en-v1.5-q downloaded and verified');
      const again = await kb(['models', 'pull'], env);
      expect(again.stderr).toContain('already present and verified');
      const started = await serve(env);
      await stop(started.child);
    } finally {
      await rm(models, { recursive: true, force: true });
    }
  });

  it('refuses a second server on the same embedded store with a clear message', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'kb-lock-'));
    const env = environment({ KB_DATA_DIR: dir, DATABASE_URL: '' });
    const first = await serve(env);
    try {
      const second = await kb(['serve'], { ...env, PORT: '0' });
      expect(second.code).toBe(1);
      expect(second.stderr).toContain('open in another process');
    } finally {
      await stop(first.child);
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('servers started by a test never outlive it', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));

  /** Processes whose environment names a store under `directory` (Linux; elsewhere none are found). */
  async function serversUsing(directory: string) {
    const pids = await readdir('/proc').catch(() => [] as string[]);
    const found: number[] = [];
    for (const pid of pids.filter((name) => /^\d+$/.test(name))) {
      const environ = await readFile(`/proc/${pid}/environ`, 'latin1').catch(() => '');
      if (environ.split('\0').some((entry) => entry.startsWith(`KB_DATA_DIR=${directory}`)) && isRunning(Number(pid))) found.push(Number(pid));
    }
    return found;
  }

  it('ends kb serve of a test that timed out, and of a test whose vitest worker was killed', async () => {
    const directory = await mkdtemp(path.join(tmpdir(), 'kb-orphans-'));
    try {
      // test/fixtures: a vitest run of its own with two files that go wrong on purpose.
      const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')));
      const results = path.join(directory, 'results.json');
      const vitest = spawn(
        process.execPath,
        [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/fixtures/vitest.config.ts', '--reporter=json', `--outputFile=${results}`],
        { cwd: root, env: { ...env, KB_FIXTURE_DIR: directory }, stdio: 'ignore' },
      );
      await new Promise((resolve) => vitest.once('exit', resolve));

      const report = JSON.parse(await readFile(results, 'utf8')) as {
        testResults: { assertionResults: { title: string; status: string; duration?: number }[] }[];
      };
      const outcome = (title: string) =>
        report.testResults.flatMap((file) => file.assertionResults).find((test) => test.title === title);
      // Failed by its 20 s timeout (the JSON report does not keep the message).
      expect(outcome('times out while its kb serve runs')).toMatchObject({ status: 'failed', duration: expect.toSatisfy((ms: number) => ms >= 20_000) });
      // Checked by the fixture's next test: the server was ended after the timed-out test.
      expect(outcome('starts after the server of the timed-out test has ended')).toMatchObject({ status: 'passed' });

      const timedOut = Number(await readFile(path.join(directory, 'timed-out.pid'), 'utf8'));
      expect(isRunning(timedOut)).toBe(false);
      // The worker was SIGKILLed after its server started; the server stops once its IPC channel closes.
      const orphaned = Number(await readFile(path.join(directory, 'orphaned.pid'), 'utf8'));
      const deadline = Date.now() + 20_000;
      while (isRunning(orphaned) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(isRunning(orphaned)).toBe(false);
      expect(await serversUsing(directory)).toEqual([]);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }, 150_000);
});
