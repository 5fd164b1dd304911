import type { FC } from 'hono/jsx';
import { raw } from 'hono/html';
import type { KeyCounters } from '../../keys/key-counters.js';
import { formatAgo } from './format.js';
import { CountCell, CsrfField, FormError, figures, Section, SubmitButton, Table } from './layout.js';

export interface KeyRow {
  name: string;
  shipPrefix: string | null;
  /** False for `API_KEY` (the key named default), which lives in the settings, not the key file. */
  inFile: boolean;
  counters: KeyCounters | undefined;
}

export interface KeysModel {
  keys: KeyRow[];
  path: string;
  /** Lines of the key file the gateway skipped. */
  problems: string[];
  csrf: string;
  /** Why the last add was refused, with what was typed. */
  error?: string | undefined;
  typed?: { name: string; shipPrefix: string } | undefined;
  now: number;
}

export const Keys: FC<KeysModel> = ({ keys, path, problems, csrf, error, typed, now }) => (
  <>
    <Section name="add" heading="Add a key">
      {error === undefined ? null : <FormError id="key-error">{error}</FormError>}
      <form method="post" action="/console/keys" class="stack">
        <CsrfField csrf={csrf} />
        <div>
          <label for="key-name">
            Name <span class="hint">1 to 64 of A-Z a-z 0-9 _ . - (the device or site it is for)</span>
          </label>
          <input type="text" id="key-name" name="name" required maxlength={64} pattern="[A-Za-z0-9_.\-]{1,64}" value={typed?.name ?? ''} />
        </div>
        <div>
          <label for="key-prefix">
            Ship prefix <span class="hint">optional: the key may only send ships whose ship_id starts with this</span>
          </label>
          <input type="text" id="key-prefix" name="ship_prefix" maxlength={100} value={typed?.shipPrefix ?? ''} />
        </div>
        <SubmitButton>Add key</SubmitButton>
      </form>
    </Section>
    <Section name="keys" heading="Keys">
      <Table
        label="Keys"
        id="keys"
        columns={['Name', 'Ships', figures('Readings'), figures('Refused'), 'Last used', <span class="muted">Revoke</span>]}
      >
        {keys.map((key) => (
          <tr>
            <th scope="row">{key.name}</th>
            <td data-label="Ships">{key.shipPrefix === null ? 'all' : <span class="mono">{`${key.shipPrefix}…`}</span>}</td>
            <CountCell count={key.counters?.acceptedReadings ?? 0} label="Readings" />
            <CountCell count={key.counters?.refusedRequests ?? 0} label="Refused" />
            <td data-label="Last used">
              {key.counters?.lastSeen == null ? (
                <span class="muted">not since start</span>
              ) : (
                formatAgo(Date.parse(key.counters.lastSeen), now)
              )}
            </td>
            <td data-label="Revoke">
              {key.inFile ? (
                <form method="post" action="/console/keys/revoke">
                  <CsrfField csrf={csrf} />
                  <input type="hidden" name="name" value={key.name} />
                  <button type="submit" class="plain" aria-label={`Revoke ${key.name}`}>
                    Revoke…
                  </button>
                </form>
              ) : (
                <span class="hint">API_KEY setting</span>
              )}
            </td>
          </tr>
        ))}
      </Table>
      <p class="hint">
        Keys are kept as salted hashes in <span class="mono">{path}</span>, the file <span class="mono">harbor-gateway keys</span> edits; a
        key is shown once, when it is made. Changes apply within seconds, without a restart.
      </p>
      {problems.length === 0 ? null : (
        <div class="error">
          Lines of the key file the gateway skipped:
          <ul>
            {problems.map((p) => (
              <li>{p}</li>
            ))}
          </ul>
        </div>
      )}
    </Section>
  </>
);

export interface KeyCreatedModel {
  name: string;
  /** The new key (`key` is JSX's own prop name). */
  secret: string;
  shipPrefix: string | undefined;
  /** Ready to paste into a device's sketch: the ingest URL, the key and the certificate's fingerprint. */
  snippet: string;
  /** The snippet as a QR code (SVG), for a phone to carry it to the laptop that flashes the device. */
  qrSvg: string;
  /** The address the gateway listens on, when it is this machine's alone: no device elsewhere reaches the snippet's URL. */
  localOnly: string | undefined;
}

export const KeyCreated: FC<KeyCreatedModel> = ({ name, secret, shipPrefix, snippet, qrSvg, localOnly }) => (
  <>
    <Section name="new-key" heading={<>Key {name}</>}>
      <p>
        <strong>Copy it now: this is the only time the gateway shows it.</strong> Only its hash is kept.
        {shipPrefix === undefined ? '' : ` It may only send ships whose ship_id starts with "${shipPrefix}".`}
      </p>
      <label for="new-key">Key</label>
      <div class="secret">
        <input type="text" id="new-key" readonly value={secret} class="mono" autocomplete="off" spellcheck={false} />
        <button type="button" class="plain" data-copy="new-key" hidden>
          Copy
        </button>
      </div>
    </Section>
    <Section name="snippet" heading="For the device">
      {localOnly === undefined ? null : (
        <p class="error" id="snippet-local-only">
          The gateway listens on {localOnly} (HOST): only this machine reaches this URL. A device on the LAN needs the gateway started with
          HOST=0.0.0.0 or the board's own address.
        </p>
      )}
      <div class="grid2">
        <div>
          <pre id="snippet">{snippet}</pre>
          <div class="actions">
            <button type="button" class="plain" data-copy="snippet" hidden>
              Copy
            </button>
          </div>
        </div>
        <figure class="qr-figure">
          <div class="qr" role="img" aria-label="QR code of the snippet beside it">
            {raw(qrSvg)}
          </div>
          <figcaption class="hint">The same snippet as a QR code.</figcaption>
        </figure>
      </div>
    </Section>
    <p>
      <a href="/console/keys">Back to the keys</a>
    </p>
  </>
);
