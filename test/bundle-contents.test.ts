import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { bundleOptions } from '../build.mjs';

// Both threads hold the source text of the bundle's files they load, so what it carries and never runs costs memory.
// zod's index re-exports every locale (44 of them, 300 KB); the gateway imports zod as a namespace
// (`import * as z`), which lets esbuild keep only what it uses: English, zod's default, alone.
describe('the bundle', () => {
  it('carries zod with its English messages only', async () => {
    const result = await build({ ...bundleOptions, write: false, metafile: true, sourcemap: false, legalComments: 'none' });
    // Modules that contribute code (zod's locale index contributes an empty initialiser).
    const inputs = Object.values(result.metafile.outputs)
      .flatMap((output) => Object.entries(output.inputs))
      .filter(([, input]) => input.bytesInOutput > 0)
      .map(([path]) => path);
    expect(inputs.some((input) => input.includes('node_modules/zod/'))).toBe(true);
    const locales = inputs.filter((input) => /node_modules\/zod\/.*\/locales\/(?!index\.js$)/.test(input));
    expect(locales).toEqual(['node_modules/zod/v4/locales/en.js']);
  });
});
