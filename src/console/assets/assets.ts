import { createHash } from 'node:crypto';
import { CONSOLE_CSS } from './console-css.js';
import { CONSOLE_JS } from './console-js.js';

/** A harbour-blue square with a wave: the tab icon, so browsers do not ask for /favicon.ico. */
const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#17324d"/><path d="M5 19c3 0 3-3 6-3s3 3 6 3 3-3 6-3 3 3 4 3" fill="none" stroke="#9cc9ff" stroke-width="3" stroke-linecap="round"/></svg>';

export interface Asset {
  body: string;
  type: string;
}

/** A Map, not an object: a name from the request (`constructor`, `__proto__`) finds nothing inherited. */
export const ASSETS: ReadonlyMap<string, Asset> = new Map([
  ['console.css', { body: CONSOLE_CSS, type: 'text/css; charset=utf-8' }],
  ['console.js', { body: CONSOLE_JS, type: 'text/javascript; charset=utf-8' }],
  ['icon.svg', { body: ICON_SVG, type: 'image/svg+xml' }],
]);

/** Changes whenever an asset does, so browsers may cache them for good under their versioned URL. */
export const ASSET_VERSION = createHash('sha256')
  .update([...ASSETS.values()].map((a) => a.body).join('\0'))
  .digest('hex')
  .slice(0, 12);
