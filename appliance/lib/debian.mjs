// The Debian release the appliance is built from, in one place for the image build and the check.
// Debian 13 (trixie): its nodejs is 20.19 (the gateway's minimum) with Debian security support,
// its openjdk-21 runs QuestDB 9.3.4, its kernel and raspi-firmware boot a Raspberry Pi 4.
import { createHash } from 'node:crypto';

export const SUITE = 'trixie';
const mirror = process.env['DEBIAN_MIRROR'] ?? 'http://deb.debian.org/debian';
const securityMirror = process.env['DEBIAN_SECURITY_MIRROR'] ?? 'http://security.debian.org/debian-security';
const components = 'main non-free-firmware';

/** apt source lines: the release, its updates and its security fixes. */
export const DEBIAN_SOURCES = [
  `deb ${mirror} ${SUITE} ${components}`,
  `deb ${mirror} ${SUITE}-updates ${components}`,
  `deb ${securityMirror} ${SUITE}-security ${components}`,
];

/** Packages of the arm64 sysroot: the target Node and its headers for cross-building better-sqlite3. */
export const SYSROOT_PACKAGES = ['nodejs', 'libnode-dev'];

/** A short stable digest of what a cached artefact was made from. */
export const digest = (/** @type {unknown} */ value) => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 12);
