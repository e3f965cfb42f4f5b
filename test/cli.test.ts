import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const kbBin = fileURLToPath(new URL('../bin/kb.mjs', import.meta.url));
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

function kb(args: string[], env = environment()): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [kbBin, ...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** Starts `kb serve` on a free port and resolves once it prints its address. */
function serve(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [kbBin, 'serve'], { env: { ...env, PORT: '0' } });
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) resolve({ child, url: match[1]!, output: () => output });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (chunk) => (output += chunk.toString()));
    child.on('exit', (code) => reject(new Error(`kb serve exited with ${code}: ${output}`)));
  });
}

function stop(child: ChildProcess) {
  return new Promise<void>((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

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

describe('first start on an empty embedded store', () => {
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
