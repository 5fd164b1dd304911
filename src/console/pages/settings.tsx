import type { FC } from 'hono/jsx';
import type { ConfigCheck } from '../../config/check-config.js';
import type { ApplianceReleases } from '../update-bundle.js';
import { CsrfField, Section, SubmitButton, Table } from './layout.js';

export interface SettingRow {
  env: string;
  /** The value as the environment or the default gave it; secrets are never shown. */
  shown: string;
  origin: 'environment' | 'default' | 'unset';
  secret: boolean;
}

export interface CertificateFacts {
  fingerprintSha256: string;
  source: string;
  subjectAltName: string;
  notAfter: string;
}

export interface SettingsModel {
  certificate: CertificateFacts;
  settings: SettingRow[];
  check: ConfigCheck;
  /** The appliance's updates, when this system has them: what an upload does, and the releases. */
  update: { description: string; releases: ApplianceReleases | undefined } | undefined;
  csrf: string;
}

export const Settings: FC<SettingsModel> = ({ certificate, settings, check, update, csrf }) => (
  <>
    <Section name="cert" heading="HTTPS certificate">
      <dl class="facts">
        <dt>Fingerprint (SHA-256)</dt>
        <dd class="mono" id="cert-fingerprint">
          {certificate.fingerprintSha256}
        </dd>
        <dt>Source</dt>
        <dd>{certificate.source}</dd>
        <dt>Names</dt>
        <dd class="mono">{certificate.subjectAltName}</dd>
        <dt>Valid until</dt>
        <dd>{certificate.notAfter}</dd>
      </dl>
      <p class="actions">
        <a href="/console/certificate.pem" download="harbor-gateway.pem">
          Download the certificate (PEM)
        </a>
      </p>
      <p class="hint">Compare the fingerprint with the one your browser or device shows before trusting the connection.</p>
    </Section>
    <Section name="check" heading="What check-config says now">
      {check.valid ? (
        <div id="check-config">
          <p class="notice">{check.summary}</p>
          {check.notices.map((n) => (
            <p class="warning">{n}</p>
          ))}
        </div>
      ) : (
        <div class="error" id="check-config">
          The configuration would not start the gateway now:
          <ul>
            {check.problems.map((p) => (
              <li>{p}</li>
            ))}
          </ul>
        </div>
      )}
      <p class="hint">The settings and files as they are now; the running gateway keeps what it read at its start.</p>
    </Section>
    {update === undefined ? null : (
      <Section name="update" heading="Update">
        {update.releases === undefined ? null : <Releases releases={update.releases} csrf={csrf} />}
        <p>{update.description}</p>
        <form method="post" action={`/console/update?_csrf=${encodeURIComponent(csrf)}`} enctype="multipart/form-data" class="stack">
          <CsrfField csrf={csrf} />
          <div>
            <label for="bundle">Update bundle</label>
            <input type="file" id="bundle" name="bundle" required />
          </div>
          <SubmitButton>Upload and install</SubmitButton>
        </form>
      </Section>
    )}
    <Section name="settings" heading="Effective settings">
      <Table label="Effective settings" id="settings" columns={['Variable', 'Value', 'From']}>
        {settings.map((s) => (
          <tr>
            <th scope="row" class="mono">
              {s.env}
            </th>
            <td class={s.secret ? 'muted' : 'mono'} data-label="Value">
              {s.shown}
            </td>
            <td data-label="From">{s.origin}</td>
          </tr>
        ))}
      </Table>
      <p class="hint">
        As read at start. Secrets are never shown; they may also come from the <span class="mono">*_FILE</span> settings and systemd
        credentials.
      </p>
    </Section>
  </>
);

/** The release that runs, the one the board can go back to (and the button that does), the last update. */
const Releases: FC<{ releases: ApplianceReleases; csrf: string }> = ({ releases, csrf }) => (
  <>
    <dl class="facts">
      <dt>Running release</dt>
      <dd id="release">
        {releases.version} (slot {releases.slot ?? '?'}, {releases.trial ? 'on trial: kept once the gateway is ready' : 'committed'})
      </dd>
      <dt>Previous release</dt>
      <dd id="previous-release">
        {releases.previous === null
          ? `none to go back to: ${releases.previousUnavailable}`
          : `${releases.previous.version} (slot ${releases.previous.slot})`}
      </dd>
      {releases.lastUpdate === null ? null : (
        <>
          <dt>Last update</dt>
          <dd>{releases.lastUpdate}</dd>
        </>
      )}
    </dl>
    {releases.previous === null ? null : (
      <form method="post" action="/console/update/rollback" class="actions">
        <CsrfField csrf={csrf} />
        <input type="hidden" name="to" value={releases.previous.version} />
        <SubmitButton>Go back to {releases.previous.version}</SubmitButton>
      </form>
    )}
  </>
);
