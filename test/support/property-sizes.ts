import fc from 'fast-check';

// fast-check sizes what it generates by its base size ("small": about ten elements) even where an
// arbitrary gives a larger `maxLength`, so a test that asks for keys of up to 70 bytes saw 10 at
// most. With this, a bound a test gives is a bound it reaches.
fc.configureGlobal({ defaultSizeToMaxWhenMaxSpecified: true });

/**
 * `PROPERTY_RUNS=long` (`npm test`, which CI runs, and `npm run test:unit:long`): every property
 * test at its full number of runs. Otherwise (`npm run test:unit`, the inner loop) the costly
 * ones run a tenth of them: the same properties on the same generators, fewer samples.
 */
export const LONG_PROPERTY_RUNS = process.env['PROPERTY_RUNS'] === 'long';

/** A property's number of runs: `full` in the long runs, a tenth of it (at least 10) in the inner loop. */
export const propertyRuns = (full: number): number => (LONG_PROPERTY_RUNS ? full : Math.max(10, Math.ceil(full / 10)));
