// Reading a V8 CPU profile (`node --cpu-prof`): self time per function, placed in its source file
// through the bundle's source map, and the same grouped by where the code comes from.
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * @typedef {{ id: number, callFrame: { functionName: string, url: string, lineNumber: number, columnNumber: number }, hitCount?: number, children?: number[] }} ProfileNode
 * @typedef {{ nodes: ProfileNode[], startTime: number, endTime: number, samples: number[], timeDeltas: number[] }} CpuProfile
 */

/** @type {Map<string, SourceMap | null>} */
const maps = new Map();

/** The source map beside a bundle (`<file>.map`), or null. @param {string} url */
function sourceMapOf(url) {
  if (!maps.has(url)) {
    let map = null;
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, 'utf8')));
    } catch {
      // Not a file, or no map beside it: the bundle's own location is shown.
    }
    maps.set(url, map);
  }
  return maps.get(url) ?? null;
}

/**
 * Where a frame's code is written: its source file (through the bundle's map) and line.
 * @param {ProfileNode['callFrame']} frame
 */
export function sourceOf(frame) {
  if (frame.url === '') return '';
  if (!frame.url.startsWith('file:')) return frame.url;
  const map = sourceMapOf(frame.url);
  const entry = map?.findEntry(frame.lineNumber, frame.columnNumber);
  if (entry && 'originalSource' in entry && entry.originalSource) {
    const source = entry.originalSource.replace(/^.*?(\/node_modules\/|\/src\/)/, (_, dir) => (dir === '/src/' ? 'src/' : ''));
    return `${source}:${entry.originalLine + 1}`;
  }
  // A dependency outside the bundle (a native module's JavaScript): named from its package on.
  return `${frame.url.replace(/^.*\/node_modules\/|^.*\//, '')}:${frame.lineNumber + 1}`;
}

/**
 * Where code comes from: the gateway's own source, a dependency, Node itself, V8's garbage
 * collector, or native code and idle time as V8 names them.
 * @param {string} functionName
 * @param {string} source
 */
export function areaOf(functionName, source) {
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(program)') return 'native (V8, libuv, SQLite, system calls)';
  if (source.startsWith('src/')) return 'gateway source';
  if (source.startsWith('node:')) return 'Node.js';
  if (source === '') return `native (${functionName})`;
  const pkg = /^(@[^/]+\/[^/]+|[^/]+)\//.exec(source)?.[1];
  return pkg ?? source;
}

/** The monotonic clock V8 stamps profiles with (CLOCK_MONOTONIC, microseconds), as this process reads it. */
export const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

/**
 * Self time per function and per area, in milliseconds and shares of the busy (non-idle) time;
 * only of the samples within `window` (monotonicUs() times) when given, so start-up and shutdown
 * stay out of a load's profile.
 * @param {CpuProfile} profile
 * @param {{ fromUs: number, toUs: number }} [window]
 */
export function summarizeProfile(profile, window) {
  /** @type {Map<number, ProfileNode>} */
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  /** @type {Map<number, number>} microseconds of self time by node id */
  const self = new Map();
  let at = profile.startTime;
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    // A sample's time is when it was taken; it stands for the interval up to the next one.
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (window !== undefined && (at < window.fromUs || at >= window.toUs)) continue;
    first = Math.min(first, at);
    last = Math.max(last, at + us);
    const id = /** @type {number} */ (profile.samples[i]);
    self.set(id, (self.get(id) ?? 0) + us);
  }
  /** @type {Map<string, { functionName: string, source: string, area: string, us: number }>} */
  const functions = new Map();
  /** @type {Map<string, number>} */
  const areas = new Map();
  let busyUs = 0;
  for (const [id, us] of self) {
    const frame = /** @type {ProfileNode} */ (byId.get(id)).callFrame;
    const source = sourceOf(frame);
    const functionName = frame.functionName || '(anonymous)';
    const area = areaOf(functionName, source);
    if (area !== 'idle') busyUs += us;
    const key = `${functionName} ${source}`;
    const known = functions.get(key) ?? { functionName, source, area, us: 0 };
    known.us += us;
    functions.set(key, known);
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  const share = (/** @type {number} */ us) => (busyUs > 0 ? us / busyUs : 0);
  return {
    wallMs: last > first ? (last - first) / 1000 : 0,
    busyMs: busyUs / 1000,
    functions: [...functions.values()]
      .filter((f) => f.area !== 'idle')
      .sort((a, b) => b.us - a.us)
      .map((f) => ({ ...f, ms: f.us / 1000, share: share(f.us) })),
    areas: [...areas]
      .filter(([area]) => area !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, ms: us / 1000, share: share(us) })),
  };
}
