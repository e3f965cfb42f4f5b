import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { procStatFields } from './processes.js';
import { fileURLToPath } from 'node:url';

export const kbBin = fileURLToPath(new URL('../../bin/kb.mjs', import.meta.url));

// The tests run the TypeScript sources, but a spawned `kb` runs dist/: bring it up to date with
// them before the first spawn. A no-op when it is (`npm test` has built it); `npx vitest run
// <file>` after an edit rebuilds here. Concurrent builds wait for one another (see scripts/build.mjs).
let built = false;
function buildOnce() {
  if (built) return;
  try {
    execFileSync(process.execPath, [fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url)), '--if-stale'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    built = true;
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`npm run build failed, and the tests spawn kb from dist/:\n${stdout}${stderr}`);
  }
}

// Every `kb` a test file spawns is ended by that file, whatever happens to the test that started
// it: after each test (passed, failed or timed out: a timed-out test's own `finally` may never
// run), after all (children of beforeAll hooks, or spawned late by a test that timed out), and
// when the worker process exits. `kb serve` also gets an IPC channel and stops when it closes,
// which covers a worker that is killed outright. The hooks are registered per file by
// test/support/per-file.ts: files of one worker share this module.
const running = new Set<ChildProcess>();
let spawnedByTest: Set<ChildProcess> | undefined;
let finished = false;

function track(child: ChildProcess) {
  running.add(child);
  spawnedByTest?.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

function launch(args: string[], env: NodeJS.ProcessEnv, ipc: boolean) {
  if (finished) throw new Error(`kb ${args.join(' ')}: spawned after the test file's teardown`);
  buildOnce();
  return track(spawn(process.execPath, [kbBin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc' as const] : [])] }));
}

const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** SIGTERM (a clean stop that releases the store), then SIGKILL if that takes longer than `graceMs`. */
async function end(children: Iterable<ChildProcess>, graceMs = 5_000) {
  await Promise.all(
    [...children].map((child) => {
      if (hasExited(child)) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      return exited.finally(() => clearTimeout(timer));
    }),
  );
}

/** What test/support/per-file.ts calls around each test file and each test. */
export const spawnedKb = {
  fileStarts() {
    finished = false;
  },
  testStarts() {
    spawnedByTest = new Set();
  },
  async testEnded() {
    const children = spawnedByTest ?? [];
    spawnedByTest = undefined;
    await end(children);
  },
  async fileEnded() {
    finished = true;
    await end(running);
  },
};

process.once('exit', () => {
  for (const child of running) if (!hasExited(child)) child.kill('SIGKILL');
});

/** Runs `kb` to completion. */
export function kb(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = launch(args, env, false);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

export type ServerProcess = { child: ChildProcess; url: string; output: () => string };

/** Starts `kb serve` on a free port and resolves once it prints its address; `spawned` hears of the process at once. */
export function serve(env: NodeJS.ProcessEnv, spawned?: (child: ChildProcess) => void): Promise<ServerProcess> {
  return new Promise((resolve, reject) => {
    const child = launch(['serve'], { ...env, PORT: '0' }, true);
    spawned?.(child);
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        child.off('exit', onEarlyExit);
        resolve({ child, url: match[1]!, output: () => output });
      }
    };
    const onEarlyExit = (code: number | null) => reject(new Error(`kb serve exited with ${code}: ${output}`));
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk) => (output += chunk.toString()));
    child.on('exit', onEarlyExit);
  });
}

/** Stops a server with `signal` (SIGTERM: a clean stop; SIGKILL: a crash) and waits for it to exit. */
export function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM') {
  return new Promise<void>((resolve) => {
    if (hasExited(child)) return resolve();
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

/**
 * Whether process `pid` still runs. On Linux a zombie (ended, not yet reaped by whoever
 * inherited it) counts as ended.
 */
export function isRunning(pid: number) {
  try {
    return procStatFields(pid)[0] !== 'Z';
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    if (process.platform === 'linux') return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
