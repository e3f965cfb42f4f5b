import { readFileSync, writeFileSync } from 'node:fs';

/**
 * Peak resident set size of this process over one step. On Linux the kernel's own high-water
 * mark (VmHWM) is reset at the start of the step, so no short spike is missed; elsewhere, or when
 * /proc/self/clear_refs cannot be written, the RSS is sampled every 50 ms.
 */
export class PeakRss {
  private sampled = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly kernelPeak: boolean;

  constructor() {
    this.kernelPeak = resetKernelPeak();
    this.sampled = process.memoryUsage.rss();
    this.timer = setInterval(() => this.sample(), 50);
    this.timer.unref();
  }

  private sample() {
    this.sampled = Math.max(this.sampled, process.memoryUsage.rss());
  }

  /** Stops sampling and returns the peak in bytes. */
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    const kernel = this.kernelPeak ? kernelPeakBytes() : null;
    return Math.max(this.sampled, kernel ?? 0);
  }
}

function resetKernelPeak(): boolean {
  if (process.platform !== 'linux') return false;
  try {
    // "5" resets the peak RSS (VmHWM) to the current RSS; see proc(5).
    writeFileSync('/proc/self/clear_refs', '5');
    return kernelPeakBytes() !== null;
  } catch {
    return false;
  }
}

function kernelPeakBytes(): number | null {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}
