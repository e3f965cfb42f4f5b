import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * Which CPUs the threads of a process on the embedded store keep to. A search hands its query to
 * the embedding thread, and while the model runs (about 5 ms) the HTTP thread and the store's
 * thread check the workspace, bring the keyword side up to date and rank the keywords. Left to
 * the scheduler on a 2-core machine, one of them was often put beside the embedding, which then
 * took about a third longer than alone (docs/benchmarks.md). So:
 * - `mainCpus`: the HTTP thread and the store's thread, which hand work to each other all the time;
 * - `queryCpus`: the thread that embeds queries, the last CPU the process may use;
 * - `allCpus`: passage embedding and parsing, which take whatever the others leave. They are
 *   placed explicitly, since a thread or process started by the HTTP thread inherits its CPUs.
 */
export type ThreadPlacement = { mainCpus: number[]; queryCpus: number[]; allCpus: number[] };

/** A `Cpus_allowed_list` ("0-3,6") as CPU numbers, ascending; undefined when it is not one. */
export function parseCpuList(list: string): number[] | undefined {
  const cpus = new Set<number>();
  for (const part of list.trim().split(',')) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!match) return undefined;
    const first = Number(match[1]);
    const last = Number(match[2] ?? match[1]);
    if (last < first || last - first > 4096) return undefined;
    for (let cpu = first; cpu <= last; cpu++) cpus.add(cpu);
  }
  return cpus.size > 0 ? [...cpus].sort((a, b) => a - b) : undefined;
}

/** The CPUs a `/proc/.../status` text allows its thread or process; undefined when it does not say. */
export function cpusAllowedIn(status: string): number[] | undefined {
  const line = status.split('\n').find((entry) => entry.startsWith('Cpus_allowed_list:'));
  return line ? parseCpuList(line.slice('Cpus_allowed_list:'.length)) : undefined;
}

/** The CPUs the calling thread may run on, as Linux reports them; undefined elsewhere. */
export function threadCpus(): number[] | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    // Read synchronously: an asynchronous read is made by a thread of libuv's pool, and /proc/thread-self is then that thread.
    return cpusAllowedIn(readFileSync('/proc/thread-self/status', 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * The placement for a process, from the CPUs it may use (`cpus`, read before any placement). Only
 * on the embedded store and with two CPUs or more: with PostgreSQL the store is another process,
 * and several API processes on one machine would all want the same CPU for their queries.
 */
export function planThreadPlacement(setting: 'auto' | 'off', embeddedStore: boolean, cpus: readonly number[] | undefined): ThreadPlacement | undefined {
  if (setting === 'off' || !embeddedStore || !cpus || cpus.length < 2) return undefined;
  return { mainCpus: cpus.slice(0, -1), queryCpus: cpus.slice(-1), allCpus: [...cpus] };
}

function ownThreadId(): string {
  // "<pid>/task/<tid>": the thread's own id, which Node does not expose (read synchronously, see threadCpus).
  return readlinkSync('/proc/thread-self').split('/').at(-1)!;
}

function tasksetProblem(error: unknown): string {
  const failure = error as Error & { code?: string; stderr?: string | Buffer };
  if (failure.code === 'ENOENT') return 'taskset (util-linux) is not installed';
  return `taskset failed: ${String(failure.stderr ?? '').trim() || failure.message}`;
}

/**
 * Keeps the calling thread on `cpus` with taskset(1) (util-linux), which sets one thread's CPUs
 * by its id. Resolves with why it could not, or undefined once done: a thread that cannot be
 * placed runs wherever the scheduler puts it, as without placement.
 */
export async function placeThisThread(cpus: readonly number[]): Promise<string | undefined> {
  let threadId: string;
  try {
    threadId = ownThreadId();
  } catch (error) {
    return `the thread's id is not readable (${(error as Error).message})`;
  }
  try {
    await execFileAsync('taskset', ['--pid', '--cpu-list', cpus.join(','), threadId], { timeout: 10_000 });
    return undefined;
  } catch (error) {
    return tasksetProblem(error);
  }
}

/**
 * Puts every thread of this process on `cpus`, before the process starts any of its own: a
 * process started by a placed thread inherits that thread's CPUs. Synchronous, so that no thread
 * starts meanwhile; the ones that come later inherit from the threads placed here.
 */
export function placeThisProcess(cpus: readonly number[]): string | undefined {
  try {
    execFileSync('taskset', ['--all-tasks', '--pid', '--cpu-list', cpus.join(','), String(process.pid)], { timeout: 10_000, stdio: ['ignore', 'ignore', 'pipe'] });
    return undefined;
  } catch (error) {
    return tasksetProblem(error);
  }
}

const cpusFlag = '--cpus=';

/** The argument that tells a process started by this one its CPUs (see cpusFromArguments). */
export function cpusArgument(cpus: readonly number[]): string {
  return `${cpusFlag}${cpus.join(',')}`;
}

/** The CPUs a process was told with cpusArgument, if it was. */
export function cpusFromArguments(argv: readonly string[]): number[] | undefined {
  const argument = argv.find((entry) => entry.startsWith(cpusFlag));
  return argument === undefined ? undefined : parseCpuList(argument.slice(cpusFlag.length));
}
