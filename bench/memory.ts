import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/**
 * Peak resident set size of this process and the processes it started (the service's parsing
 * processes) over one step. On Linux each process's own high-water mark (VmHWM) is reset at the
 * start of the step, so no short spike is missed: the peak is this process's plus each child's
 * (an upper bound, as their peaks need not coincide), or the highest sum sampled every 50 ms,
 * whichever is larger. A child that ended during the step counts with its last sample.
 * Elsewhere, or when /proc/self/clear_refs cannot be written, only the samples count.
 */
export class PeakRss {
  private sampled = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly kernelPeak: boolean;
  /** Each child's highest RSS seen, kept after it ends. */
  private readonly childPeaks = new Map<number, number>();

  constructor() {
    this.kernelPeak = resetKernelPeak('self');
    for (const child of childProcesses()) resetKernelPeak(String(child));
    this.sampled = this.sum();
    this.timer = setInterval(() => this.sample(), 50);
    this.timer.unref();
  }

  private sum(): number {
    let total = process.memoryUsage.rss();
    for (const child of childProcesses()) {
      const bytes = statusBytes(String(child), 'VmRSS') ?? 0;
      this.childPeaks.set(child, Math.max(this.childPeaks.get(child) ?? 0, bytes));
      total += bytes;
    }
    return total;
  }

  private sample() {
    this.sampled = Math.max(this.sampled, this.sum());
  }

  /** Stops sampling and returns the peak in bytes. */
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    if (!this.kernelPeak) return this.sampled;
    let kernel = statusBytes('self', 'VmHWM') ?? 0;
    for (const [child, sampled] of this.childPeaks) kernel += Math.max(sampled, statusBytes(String(child), 'VmHWM') ?? 0);
    return Math.max(this.sampled, kernel);
  }
}

/** The processes this one started (Linux; none elsewhere). */
function childProcesses(): number[] {
  if (process.platform !== 'linux') return [];
  try {
    return readdirSync('/proc/self/task').flatMap((task) =>
      readFileSync(`/proc/self/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

function resetKernelPeak(pid: string): boolean {
  if (process.platform !== 'linux') return false;
  try {
    // "5" resets the peak RSS (VmHWM) to the current RSS; see proc(5).
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return statusBytes(pid, 'VmHWM') !== null;
  } catch {
    return false;
  }
}

function statusBytes(pid: string, field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}
