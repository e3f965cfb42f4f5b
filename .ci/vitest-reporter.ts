// vitest's default reporter for CI, less its closing summary ("Tests  606 passed (606)"): CI
// takes a test runner's closing lines as the run's count, and the count it must read is the one
// .ci/check-results.mjs prints for each store and for the whole run. Files, slow tests and every
// failure with its diff are still printed as they happen.
import type { RunnerTestFile } from 'vitest';
import { DefaultReporter } from 'vitest/node';

export default class CiReporter extends DefaultReporter {
  override reportTestSummary(files: RunnerTestFile[]): void {
    const seconds = files.reduce((total, file) => total + (file.result?.duration ?? 0), 0) / 1000;
    this.log(`\nvitest: ${files.length} test file${files.length === 1 ? '' : 's'} run (${seconds.toFixed(1)} s of test time)`);
  }
}
