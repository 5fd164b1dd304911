// Update bundles a technician copies to HARBOR-BOOT, under whatever name they came with: every
// *.raucb (any case) is looked at; the newest one the board may install wins, and each other one
// is removed with the reason it was not taken.
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { COMPATIBLE } from './rauc.mjs';
import { compareVersions, versionDecision } from './versions.mjs';

/** A bundle being installed keeps its name with this added, so a power cut meanwhile is seen at the next boot. */
export const INSTALLING = '.installing';
const BUNDLE = /\.raucb$/i;

/** The bundles on the boot partition, and the one whose installation a power cut interrupted. */
export function bootBundles(/** @type {string} */ boot) {
  const files = readdirSync(boot).filter((name) => {
    try {
      return lstatSync(join(boot, name)).isFile();
    } catch {
      return false;
    }
  });
  return {
    bundles: files.filter((name) => BUNDLE.test(name)).sort(),
    interrupted: files.find((name) => name.endsWith(INSTALLING) && BUNDLE.test(name.slice(0, -INSTALLING.length))),
  };
}

/**
 * Which of the bundles found to install: the newest that is signed by the release key, is for this
 * board and is newer than the running release; the others with the reason each was not taken.
 * @param {{ name: string, manifest: { version: string, compatible: string } | { problem: string } }[]} found
 * @param {string} running
 */
export function chooseBundle(found, running) {
  /** @type {{ name: string, version: string }[]} */
  const candidates = [];
  /** @type {{ name: string, reason: string }[]} */
  const refused = [];
  for (const { name, manifest } of found) {
    if ('problem' in manifest) refused.push({ name, reason: manifest.problem });
    else if (manifest.compatible !== COMPATIBLE)
      refused.push({ name, reason: `it is for ${manifest.compatible}, this board is ${COMPATIBLE}` });
    else {
      const decision = versionDecision(running, manifest.version);
      if (decision.allowed) candidates.push({ name, version: manifest.version });
      else refused.push({ name, reason: decision.reason.replace(/; refused without --force$/, '') });
    }
  }
  candidates.sort((a, b) => compareVersions(b.version, a.version) || a.name.localeCompare(b.name));
  const [chosen, ...older] = candidates;
  for (const other of older)
    refused.push({
      name: other.name,
      reason: `${other.version} is not the newest bundle on the card (${chosen?.name} is ${chosen?.version})`,
    });
  return { chosen, refused };
}
