// Module hooks of loaded-modules.mjs (they run on Node's loader thread).
import { appendFileSync } from 'node:fs';

/** @type {string} */
let file;

/** @param {{ file: string }} data */
export function initialize(data) {
  file = data.file;
}

/**
 * @param {string} url
 * @param {unknown} context
 * @param {(url: string, context: unknown) => unknown} next
 */
export function load(url, context, next) {
  appendFileSync(file, `${url}\n`);
  return next(url, context);
}
