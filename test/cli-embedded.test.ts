// The command line on a store of its own, whatever store the suite runs on: a first start on an
// empty embedded store, its model checks and its lock, and servers that must not outlive the test
// that started them. The PostgreSQL legs of CI would run these exactly as the embedded leg does,
// so they run there only (vitest.config.ts, storeIndependent).
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { isRunning, kb, serve, stop } from './support/cli.js';
import { copyMigratedStore, migratedDataDir } from './support/server.js';
import { childProcessesOf, threadsOf, until } from './support/processes.js';
import { planThreadPlacement, threadCpus } from '../src/thread-placement.js';

/** An embedded store in `dataDir`, never the suite's DATABASE_URL. */
function environment(dataDir: string, overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: '', KB_LOG_LEVEL: 'error', ...overrides };
}

describe('kb serve on an embedded store of its own', { timeout: 120_000 }, () => {
  it('creates admin@localhost with 1,000 credits on an empty store and prints its key once', async () => {
    const emptyDir = await mkdtemp(path.join(tmpdir(), 'kb-first-'));
    const env = environment(emptyDir);
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
    const dataDir = await migratedDataDir('kb-nomodel-');
    const env = environment(dataDir);
    try {
      const refused = await kb(['serve'], { ...env, PORT: '0', KB_MODELS_DIR: path.join(dataDir, 'no-models') });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^kb: The embedded model bge-small-en-v1\.5-q is not usable: .*model\.onnx is missing.*kb models pull/);
      expect(refused.stdout).not.toMatch(/sk_/);
      const started = await serve(env);
      expect(started.output()).toMatch(/Created admin@localhost with 1000 credits[\s\S]*sk_[0-9A-Za-z]{32,}/);
      await stop(started.child);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a port in use with a clear message, and leaves the store to the next start', async () => {
    const dataDir = await migratedDataDir('kb-port-');
    const env = environment(dataDir);
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const refused = await kb(['serve'], { ...env, HOST: '127.0.0.1', PORT: String(port) });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(`kb: cannot listen on 127.0.0.1:${port}: another process uses it; set PORT to another port (0 takes any free one) or HOST to another address\n`);
      const started = await serve(env);
      expect((await fetch(`${started.url}/healthz`)).status).toBe(200);
      await stop(started.child);
    } finally {
      blocker.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a corrupt model, and kb models pull replaces it with the verified one', async () => {
    const models = await mkdtemp(path.join(tmpdir(), 'kb-models-'));
    const env = environment(path.join(models, 'data'), { KB_MODELS_DIR: models });
    await copyMigratedStore(path.join(models, 'data'));
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
    const dir = await migratedDataDir('kb-lock-');
    const env = environment(dir);
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

describe('where kb serve runs its threads on the embedded store (KB_THREAD_PLACEMENT)', { timeout: 120_000 }, () => {
  it('keeps the query embedding on a CPU of its own, the HTTP and store threads on the others, and passages and parsing on all', async () => {
    // The suite runs with placement off (vitest.config.ts); this server is started as a user's would be.
    const machine = threadCpus()!;
    const plan = planThreadPlacement('auto', true, machine);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'kb-threads-'));
    try {
      const server = await serve(environment(dataDir, { KB_THREAD_PLACEMENT: 'auto', KB_LOG_LEVEL: 'info' }));
      try {
        const pid = server.child.pid!;
        // The HTTP thread is placed once the load ahead at start has ended, just after the server listens.
        if (plan) await until(() => /threads: /.test(server.output()), 30_000);
        const threads = threadsOf(pid);
        if (!plan) {
          // One CPU: nothing to place, and nothing is.
          expect(threads.every((thread) => thread.cpus.join() === machine.join())).toBe(true);
          expect(server.output()).not.toMatch(/threads: /);
          return;
        }
        expect(server.output()).toContain(`threads: HTTP and the store on CPU ${plan.mainCpus.join(',')}, query embedding on CPU ${plan.queryCpus.join(',')}`);
        expect(threads.find((thread) => thread.id === pid)!.cpus).toEqual(plan.mainCpus);
        // The store's thread beside the HTTP thread, and the query thread (with any thread it started) apart.
        expect(threads.filter((thread) => thread.id !== pid && thread.cpus.join() === plan.mainCpus.join()).length).toBeGreaterThanOrEqual(1);
        const queryThreads = threads.filter((thread) => thread.cpus.join() === plan.queryCpus.join());
        expect(queryThreads.length).toBeGreaterThanOrEqual(1);
        // The passage workers were started by the HTTP thread, and took all CPUs back.
        expect(threads.filter((thread) => thread.cpus.join() === plan.allCpus.join()).length).toBeGreaterThanOrEqual(2);
        // So did the parsing processes (started at once by a server that ingests), every thread of them.
        const parsers = childProcessesOf(pid, 'parse-process');
        expect(parsers.length).toBeGreaterThanOrEqual(1);
        for (const parser of parsers) for (const thread of threadsOf(parser)) expect(thread.cpus).toEqual(plan.allCpus);

        // Searches embed their queries on the query thread.
        const key = /(sk_[0-9A-Za-z]{32,})/.exec(server.output())![1]!;
        const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
        const workspace = (await (await fetch(`${server.url}/v1/kb/workspaces`, { method: 'POST', headers, body: JSON.stringify({ name: 'threads' }) })).json()) as { id: string };
        const before = new Map(queryThreads.map((thread) => [thread.id, thread.ticks]));
        for (let search = 0; search < 60; search++) {
          const query = `which protein regulates cell growth in experiment ${search} of the study`;
          const answer = await fetch(`${server.url}/v1/kb/query`, { method: 'POST', headers, body: JSON.stringify({ query, workspace_id: workspace.id }) });
          expect(answer.status).toBe(200);
        }
        const after = threadsOf(pid).filter((thread) => before.has(thread.id));
        const ticks = after.reduce((sum, thread) => sum + thread.ticks - before.get(thread.id)!, 0);
        // 60 embeddings of a few milliseconds each: at least some tens of 10 ms ticks, on that thread.
        expect(ticks).toBeGreaterThanOrEqual(5);
      } finally {
        await stop(server.child);
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
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
        { cwd: root, env: { ...env, KB_FIXTURE_DIR: directory, KB_FIXTURE_STORE: inject('migratedEmbeddedStore') ?? '' }, stdio: 'ignore' },
      );
      await new Promise((resolve) => vitest.once('exit', resolve));

      const report = JSON.parse(await readFile(results, 'utf8')) as {
        testResults: { assertionResults: { title: string; status: string; duration?: number }[] }[];
      };
      const outcome = (title: string) =>
        report.testResults.flatMap((file) => file.assertionResults).find((test) => test.title === title);
      // Failed by its 10 s timeout (the JSON report does not keep the message).
      expect(outcome('times out while its kb serve runs')).toMatchObject({ status: 'failed', duration: expect.toSatisfy((ms: number) => ms >= 10_000) });
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
