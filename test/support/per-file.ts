// Registered before each test file (vitest.config.ts, setupFiles). The files of one worker share
// the modules they import (isolate: false), whose top level runs once per worker: what each file
// must do for itself is registered here.
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { spawnedKb } from './cli.js';

beforeAll(() => spawnedKb.fileStarts());
beforeEach(() => spawnedKb.testStarts());
afterEach(() => spawnedKb.testEnded());
afterAll(() => spawnedKb.fileEnded());
