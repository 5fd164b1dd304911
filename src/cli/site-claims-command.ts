import { existsSync } from 'node:fs';
import { claimsFile, SiteClaims, type ClaimConflict, type SiteClaim } from '../claims/site-claims.js';
import { SETTINGS } from '../config/settings.js';
import { commandUser, recordAudit } from './cli-audit.js';

export const SITE_CLAIMS_USAGE = `harbor-gateway site-claims <command> [options]

At a centre: which gateway instance owns each site id gateways forward here under (the first to
claim it), and the instances refused because another owns their site (two gateways with one site id).

  list [--json]        every claim and every instance refused, with when each was last heard
  release SITE         let go of SITE's claim: the next gateway that forwards under it owns it.
                       Rename or stop the gateway that should not have it first. Beside a running
                       gateway it takes effect at its next housekeeping run (10 s)

  --data-dir DIR       the gateway's data directory (default: $DATA_DIR or ${SETTINGS.dataDir.default})
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

const DAY_MS = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();
const who = (c: { instance: string; gateway: string | null }) =>
  `instance ${c.instance}${c.gateway === null ? '' : ` (gateway ${JSON.stringify(c.gateway)})`}`;

/** Runs the site-claims command; returns the exit status. */
export function siteClaimsCommand(args: string[], env: NodeJS.ProcessEnv, io: Output): number {
  const [command, ...rest] = args;
  let dataDir = env[SETTINGS.dataDir.env] || SETTINGS.dataDir.default!;
  let json = false;
  const sites: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--data-dir') dataDir = rest[++i] ?? '';
    else if (arg === '--json') json = true;
    else if (!arg.startsWith('--')) sites.push(arg);
    else {
      io.err(`unknown argument: ${arg}\n\n${SITE_CLAIMS_USAGE}`);
      return 64;
    }
  }
  if (command === 'help' || command === undefined) {
    (command === 'help' ? io.out : io.err)(SITE_CLAIMS_USAGE);
    return command === 'help' ? 0 : 64;
  }
  if (
    (command !== 'list' && command !== 'release') ||
    (command === 'release') !== (sites.length === 1) ||
    (command === 'list' && sites.length > 0)
  ) {
    io.err(SITE_CLAIMS_USAGE);
    return 64;
  }
  if (!existsSync(claimsFile(dataDir))) {
    if (command === 'list') {
      io.out(json ? '{"claims":[],"conflicts":[]}\n' : `no site claims in ${dataDir}: no gateway forwards here with an instance\n`);
      return 0;
    }
    io.err(`no site claims in ${dataDir}\n`);
    return 66;
  }
  const expiryDays = Number(env[SETTINGS.siteClaimExpiryDays.env] || SETTINGS.siteClaimExpiryDays.default);
  const claims = new SiteClaims({ dataDir, expiryMs: (Number.isFinite(expiryDays) ? expiryDays : 7) * DAY_MS });
  try {
    if (command === 'release') {
      const released = claims.release(sites[0]!);
      if (released === undefined) {
        io.err(`site ${JSON.stringify(sites[0])} is not claimed\n`);
        return 1;
      }
      io.out(`released site ${JSON.stringify(released.site)} from ${who(released)}: the next gateway that forwards under it owns it\n`);
      recordAudit(
        dataDir,
        [
          {
            action: 'site_claim_released',
            outcome: 'ok',
            actor: 'cli',
            origin: commandUser(env),
            subject: released.site,
            detail: `from ${who(released)}`,
          },
        ],
        io.err,
      );
      return 0;
    }
    const listed = claims.list();
    io.out(json ? `${JSON.stringify(listed)}\n` : describe(listed.claims, listed.conflicts));
    return 0;
  } finally {
    claims.close();
  }
}

function describe(claims: readonly SiteClaim[], conflicts: readonly ClaimConflict[]): string {
  if (claims.length === 0 && conflicts.length === 0) return 'no site claims\n';
  const lines: string[] = [];
  const sites = [...new Set([...claims.map((c) => c.site), ...conflicts.map((c) => c.site)])].sort();
  for (const site of sites) {
    const owner = claims.find((c) => c.site === site);
    lines.push(
      owner === undefined
        ? `site ${JSON.stringify(site)}: not claimed`
        : `site ${JSON.stringify(site)}: ${who(owner)} since ${iso(owner.firstMs)}, last heard ${iso(owner.lastMs)}`,
    );
    for (const c of conflicts.filter((c) => c.site === site)) {
      lines.push(`  refused: ${who(c)}, ${c.refusedRequests} requests from ${iso(c.firstMs)} to ${iso(c.lastMs)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}
