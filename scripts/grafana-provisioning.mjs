// Writes the provisioned dashboards and alert rules from their sources in scripts/lib/grafana-*.mjs:
//   node scripts/grafana-provisioning.mjs           write grafana/provisioning/
//   node scripts/grafana-provisioning.mjs --check   exit 1 when the committed files differ
// The dashboards' SQL shares its pieces (the catalogue's meaning of cargo ids, ship names, the
// gateways' last word) with the rules; written out, each file is what Grafana reads.
import { readFileSync, writeFileSync } from 'node:fs';
import { alertRules } from './lib/grafana-rules.mjs';
import { gatewayDashboard } from './lib/grafana-gateway.mjs';
import { siteDashboard } from './lib/grafana-site.mjs';
import { ALERT_RULES_PATH, DASHBOARD_PATH, GATEWAY_DASHBOARD_PATH } from './lib/grafana-expand.mjs';

const files = {
  [DASHBOARD_PATH]: `${JSON.stringify(siteDashboard(), null, 2)}\n`,
  [GATEWAY_DASHBOARD_PATH]: `${JSON.stringify(gatewayDashboard(), null, 2)}\n`,
  [ALERT_RULES_PATH]: alertRules(),
};

const check = process.argv.includes('--check');
const stale = [];
for (const [path, text] of Object.entries(files)) {
  let current = '';
  try {
    current = readFileSync(path, 'utf8');
  } catch {}
  if (current === text) continue;
  stale.push(path);
  if (!check) writeFileSync(path, text);
}
if (check && stale.length > 0) {
  process.stderr.write(`not as scripts/grafana-provisioning.mjs writes them: ${stale.join(', ')}\n`);
  process.exit(1);
}
process.stdout.write(check ? 'provisioning up to date\n' : `${stale.length === 0 ? 'nothing changed' : `written: ${stale.join(', ')}`}\n`);
