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
  totals.passed += report.numPassedTests;
  totals.failed += report.numFailedTests;
  totals.skipped += report.numPendingTests + report.numTodoTests;
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
      if (test.status !== 'passed') process.stdout.write(`${label}: ${test.status} ${name} > ${test.fullName}\n`);
    }
  }
}
console.log(`${label}: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (totals.failed > 0 || totals.skipped > 0 || totals.passed === 0) process.exit(1);
