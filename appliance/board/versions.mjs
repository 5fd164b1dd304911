// Which bundle may replace which release: semantic versioning's order, a development build between
// the release before it and the one it becomes.

/**
 * Orders versions as semantic versioning does: X.Y.Z, then a release after its pre-releases
 * (0.5.0-dev.41 < 0.5.0), pre-release fields numerically where numeric; build metadata (+...) is
 * ignored. Negative when a is older than b.
 */
export function compareVersions(/** @type {string} */ a, /** @type {string} */ b) {
  const parse = (/** @type {string} */ v) => {
    const [core = '', pre] = v.split('+')[0]?.split(/-(.*)/s) ?? [];
    return { core: core.split('.').map((n) => Number.parseInt(n, 10) || 0), pre: pre === undefined || pre === '' ? [] : pre.split('.') };
  };
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < 3; i++) if ((x.core[i] ?? 0) !== (y.core[i] ?? 0)) return (x.core[i] ?? 0) - (y.core[i] ?? 0);
  if (x.pre.length === 0 || y.pre.length === 0) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.max(x.pre.length, y.pre.length); i++) {
    const [p, q] = [x.pre[i], y.pre[i]];
    if (p === undefined || q === undefined) return p === undefined ? -1 : 1;
    if (p === q) continue;
    const [m, n] = [/^\d+$/.test(p) ? Number(p) : undefined, /^\d+$/.test(q) ? Number(q) : undefined];
    if (m !== undefined && n !== undefined) return m - n;
    if (m !== undefined || n !== undefined) return m !== undefined ? -1 : 1;
    return p < q ? -1 : 1;
  }
  return 0;
}

/** Whether a bundle of `incoming` may replace `running`: a newer release, or anything when forced. */
export function versionDecision(/** @type {string} */ running, /** @type {string} */ incoming, force = false) {
  const order = compareVersions(incoming, running);
  if (order > 0) return { allowed: true, reason: `${running} -> ${incoming}` };
  const what = order === 0 ? `${incoming} is the release this board runs` : `${incoming} is older than ${running} (a downgrade)`;
  return force ? { allowed: true, reason: `${what}; forced` } : { allowed: false, reason: `${what}; refused without --force` };
}
