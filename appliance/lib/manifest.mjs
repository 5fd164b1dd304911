// What a release's image and bundle hold, written beside them: versions of what runs on the board,
// where each came from, the checksums, and a software bill of materials of the gateway's npm
// dependencies (CycloneDX, from the release's package-lock.json by npm's own `npm sbom`).
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { output, run } from './host.mjs';

/** Why an image built here has no Grafana: said in the manifest, the release file and the docs. */
export const WITHOUT_GRAFANA =
  "not included: Grafana's packages come only from Grafana's own apt repository (apt.grafana.com), which this build machine cannot reach; the dashboard is missing from this image";

/** name -> version of a packages.tsv written by dpkg-query. */
export function packageVersions(/** @type {string} */ tsv) {
  return new Map(
    readFileSync(tsv, 'utf8')
      .split('\n')
      .filter((line) => line.includes('\t'))
      .map((line) => /** @type {[string, string]} */ (line.split('\t'))),
  );
}

/** The CycloneDX SBOM of a tree's production dependencies, from its lockfile. */
export function writeSbom(/** @type {string} */ tree, /** @type {string} */ file) {
  const sbom = run('npm', ['sbom', '--sbom-format', 'cyclonedx', '--omit', 'dev', '--package-lock-only'], { cwd: tree, quiet: true });
  const parsed = JSON.parse(sbom);
  writeFileSync(file, `${JSON.stringify(parsed, null, 2)}\n`);
  return { file, components: Array.isArray(parsed.components) ? parsed.components.length : 0, format: `CycloneDX ${parsed.specVersion}` };
}

export const sha256 = (/** @type {string} */ file) => output('sha256sum', [file]).split(' ')[0] ?? '';

/** name, size and SHA-256 of an artefact, for the manifest. */
export const describeFile = (/** @type {string} */ file) => ({ name: basename(file), bytes: statSync(file).size, sha256: sha256(file) });

/** SHA256SUMS in the format `sha256sum -c` reads. */
export function writeChecksums(/** @type {string} */ file, /** @type {string[]} */ files) {
  writeFileSync(file, files.map((path) => `${sha256(path)}  ${basename(path)}\n`).join(''));
}
