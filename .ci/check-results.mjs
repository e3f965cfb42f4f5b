// Reads vitest JSON reports, prints a closing line, and fails when a test failed, was skipped
// or is marked todo: CI must run everything it has.
import { readFileSync } from 'node:fs';

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
}
console.log(`${label}: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (totals.failed > 0 || totals.skipped > 0 || totals.passed === 0) process.exit(1);
