import type { SeriesState } from './thinning.js';

/**
 * A series' state as the text the queue file keeps: JSON, with -0 kept as such (JSON writes it as
 * 0), since a summary's min, max or last of -0 must be the same -0 when it is sent again.
 */
const NEGATIVE_ZERO = { z: 0 };

export const encodeSeriesState = (state: SeriesState): string =>
  JSON.stringify(state, (_key, value: unknown) => (Object.is(value, -0) ? NEGATIVE_ZERO : value));

export const decodeSeriesState = (text: string): SeriesState =>
  JSON.parse(text, (_key, value: unknown) =>
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length === 1 &&
    (value as { z?: unknown }).z === 0
      ? -0
      : value,
  ) as SeriesState;
