import { afterAll } from 'vitest';
import { removeTempDirs } from './temp-dir.js';

// A setup file, so this hook is registered for every test file, also where the unit project's
// workers keep modules between files, and before the file's own afterAll hooks: those run
// last-registered first, so the file's gateways are stopped before their directories go.
afterAll(removeTempDirs);
