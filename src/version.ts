/** Replaced by the bundler with the package version; the fallback serves tests run from source. */
declare const __GATEWAY_VERSION__: string | undefined;

export const VERSION = typeof __GATEWAY_VERSION__ === 'string' ? __GATEWAY_VERSION__ : '0.0.0-dev';
