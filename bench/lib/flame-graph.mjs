// A flame graph of a V8 CPU profile as a self-contained SVG: one box per function on a stack,
// as wide as the time spent in it and what it called, callers below callees. Boxes are coloured
// by where the code comes from (the same areas as cpu-profile.mjs) and name it on hover.
import { areaOf, sourceOf } from './cpu-profile.mjs';

/** @typedef {import('./cpu-profile.mjs').CpuProfile} CpuProfile */
/** @typedef {{ label: string, area: string, us: number, children: Map<string, Frame> }} Frame */

const WIDTH = 1200;
const ROW = 16;
const MIN_WIDTH = 0.5;

/** @param {string} area */
function colour(area) {
  if (area === 'gateway source') return '#e8743b';
  if (area === 'Node.js') return '#6ba368';
  if (area === 'garbage collection') return '#c94f4f';
  if (area.startsWith('native')) return '#9a9a9a';
  return '#5b8fd1';
}

/** @param {string} text */
const xmlText = (text) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/**
 * @param {CpuProfile} profile
 * @param {{ title: string, window?: { fromUs: number, toUs: number } }} options
 * @returns {string} the SVG document
 */
export function flameGraph(profile, options) {
  /** @type {Map<number, import('./cpu-profile.mjs').ProfileNode>} */
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  /** @type {Map<number, number>} */
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  /** @type {Map<number, { label: string, area: string }>} */
  const labels = new Map();
  const labelOf = (/** @type {number} */ id) => {
    let known = labels.get(id);
    if (known === undefined) {
      const frame = /** @type {import('./cpu-profile.mjs').ProfileNode} */ (byId.get(id)).callFrame;
      const source = sourceOf(frame);
      const name = frame.functionName || '(anonymous)';
      known = { label: source === '' ? name : `${name} ${source}`, area: areaOf(name, source) };
      labels.set(id, known);
    }
    return known;
  };

  /** @type {Frame} */
  const root = { label: 'all', area: 'all', us: 0, children: new Map() };
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (options.window !== undefined && (at < options.window.fromUs || at >= options.window.toUs)) continue;
    const leaf = /** @type {number} */ (profile.samples[i]);
    if (labelOf(leaf).area === 'idle') continue;
    const stack = [];
    for (let id = leaf; id !== undefined; id = /** @type {number} */ (parent.get(id))) {
      if (byId.get(id)?.callFrame.functionName === '(root)') break;
      stack.push(id);
    }
    root.us += us;
    let frame = root;
    for (const id of stack.reverse()) {
      const { label, area } = labelOf(id);
      let child = frame.children.get(label);
      if (child === undefined) {
        child = { label, area, us: 0, children: new Map() };
        frame.children.set(label, child);
      }
      child.us += us;
      frame = child;
    }
  }

  /** @type {string[]} */
  const boxes = [];
  let depth = 0;
  const scale = root.us > 0 ? WIDTH / root.us : 0;
  /** @param {Frame} frame @param {number} x @param {number} level */
  const draw = (frame, x, level) => {
    const w = frame.us * scale;
    if (w < MIN_WIDTH) return;
    depth = Math.max(depth, level);
    const share = root.us > 0 ? ((frame.us / root.us) * 100).toFixed(1) : '0';
    const text = w > 30 ? xmlText(frame.label.slice(0, Math.floor(w / 6.5))) : '';
    boxes.push(
      `<g><title>${xmlText(frame.label)}: ${(frame.us / 1000).toFixed(0)} ms, ${share} %</title>` +
        `<rect x="${x.toFixed(1)}" y="{y${level}}" width="${w.toFixed(1)}" height="${ROW - 1}" fill="${colour(frame.area)}"/>` +
        (text ? `<text x="${(x + 3).toFixed(1)}" y="{t${level}}">${text}</text>` : '') +
        '</g>',
    );
    let childX = x;
    for (const child of [...frame.children.values()].sort((a, b) => (a.label < b.label ? -1 : 1))) {
      draw(child, childX, level + 1);
      childX += child.us * scale;
    }
  };
  draw(root, 0, 0);
  const top = 24;
  const height = top + (depth + 1) * ROW + 4;
  // Callers below callees: level 0 at the bottom.
  const body = boxes
    .join('\n')
    .replace(/\{y(\d+)\}/g, (_, l) => String(height - 4 - (Number(l) + 1) * ROW))
    .replace(/\{t(\d+)\}/g, (_, l) => String(height - 4 - Number(l) * ROW - 4));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" font-family="monospace" font-size="11">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="4" y="16" font-size="13">${xmlText(options.title)}: ${(root.us / 1000).toFixed(0)} ms busy; orange the gateway, green Node.js, blue dependencies, grey native, red garbage collection</text>
${body}
</svg>
`;
}
