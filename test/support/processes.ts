import { cpusAllowedIn } from '../../src/thread-placement.js';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * The fields of `/proc/<pid>/stat` (or of one thread's, with `pid` given as `<pid>/task/<tid>`)
 * after the command name (state first, then the parent's pid): the name is in parentheses and
 * may itself hold spaces and parentheses. Throws when there is no such process (ENOENT).
 */
export function procStatFields(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The processes `parent` started whose command line holds `command` (Linux: read from /proc). */
export function childProcessesOf(parent: number, command: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return Number(procStatFields(pid)[1]) === parent && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(command);
      } catch {
        return false; // it ended meanwhile
      }
    })
    .map(Number);
}

/** The parsing processes (src/modules/ingestion/parse-pool.ts) of server process `parent`. */
export const parsingProcessesOf = (parent: number) => childProcessesOf(parent, 'parse-process');

/** Polls `condition` every 50 ms until it holds or `timeoutMs` passes; says whether it held. */
export async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 50))) {
    if (condition()) return true;
  }
  return condition();
}

/** Each thread of process `pid` (Linux): its id, the CPUs it may use, and its CPU time so far in clock ticks. */
export function threadsOf(pid: number | string): { id: number; cpus: number[]; ticks: number }[] {
  const threads: { id: number; cpus: number[]; ticks: number }[] = [];
  for (const id of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${id}/status`, 'utf8');
      // A thread's stat has the layout of its process's (utime and stime are the 14th and 15th fields).
      const fields = procStatFields(`${pid}/task/${id}`);
      threads.push({ id: Number(id), cpus: cpusAllowedIn(status) ?? [], ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // A thread that ended while the list was read.
    }
  }
  return threads;
}
