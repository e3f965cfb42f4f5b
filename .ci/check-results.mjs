// Reads vitest JSON reports, prints a closing line, and fails when a test failed, was skipped
// or is marked todo: CI must run everything it has.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const firstLine = (text) => String(text ?? '').split('\n', 1)[0] || 'no message';

const [label, ...files] = process.argv.slice(2);
const totals = { passed: 0, failed: 0, skipped: 0 };
for (const file of files) {
  let report;
  try {
    report = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    // A suite that crashed before writing its report counts as a failure, not as nothing.
    process.stderr.write(`${label}: no report in ${file} (${error.message})\n`);
    totals.failed += 1;
    continue;
  }
  if (report.numTotalTestSuites === 0 || report.numTotalTests === 0) totals.failed += 1;
  // A hook that fails (a server that did not start in beforeAll) leaves its tests marked skipped
  // and no test failed: the file's own failure is counted, and every test that did not pass is
  // named, so a count is never the only trace of what went wrong.
  for (const testFile of report.testResults ?? []) {
    const name = relative(process.cwd(), testFile.name);
    const failedTests = (testFile.assertionResults ?? []).filter((test) => test.status === 'failed').length;
    if (testFile.status === 'failed' && failedTests === 0) {
      totals.failed += 1;
      process.stdout.write(`${label}: ${name} failed outside its tests: ${firstLine(testFile.message)}\n`);
    }
    for (const test of testFile.assertionResults ?? []) {
      // vitest reports a test that began or waited but never ended (its test process died) as
      // pending: it did not pass, and counts as failed, not as skipped.
      const unfinished = test.status === 'pending';
      if (test.status === 'passed') totals.passed += 1;
      else if (test.status === 'failed' || unfinished) totals.failed += 1;
      else totals.skipped += 1;
      if (test.status !== 'passed') {
        const status = unfinished ? 'did not finish (its test process died, or the run ended first)' : test.status;
        process.stdout.write(`${label}: ${status} ${name} > ${test.fullName}\n`);
      }
    }
  }
}
console.log(`${label}: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (totals.failed > 0 || totals.skipped > 0 || totals.passed === 0) process.exit(1);
