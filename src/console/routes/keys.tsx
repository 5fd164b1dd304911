import type { Context, Hono } from 'hono';
import { DEFAULT_KEY_NAME, KEY_NAME_PATTERN, SHIP_PREFIX_PATTERN, readKeyFile, writeKeyFile } from '../../keys/key-file.js';
import { generateKey, hashKey } from '../../keys/key-hash.js';
import { deviceSnippet, qrSvg } from '../device-snippet.js';
import type { GatewayConsole } from '../gateway-console.js';
import { Confirm } from '../pages/confirm.js';
import { KeyCreated, Keys, type KeyRow } from '../pages/keys.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { flash, renderPage, sessionFrame } from '../render.js';
import { requireFormToken } from './guard.js';
import { httpsUrl } from '../console-addresses.js';
import { addressesFor } from './pages.js';
import { peerAddress } from '../request-facts.js';

const field = (body: Record<string, unknown>, name: string): string => {
  const value = body[name];
  return typeof value === 'string' ? value.trim() : '';
};

/** Why a new key cannot be made with this name and prefix; undefined when it can. */
function refusalOf(name: string, shipPrefix: string, existing: readonly { name: string }[]): string | undefined {
  if (!KEY_NAME_PATTERN.test(name)) return 'The name must be 1 to 64 characters of A-Z a-z 0-9 _ . -';
  if (name === DEFAULT_KEY_NAME) return `The name ${DEFAULT_KEY_NAME} is the API_KEY setting's`;
  if (shipPrefix !== '' && !SHIP_PREFIX_PATTERN.test(shipPrefix)) return 'The ship prefix must be 1 to 100 characters without spaces';
  if (existing.some((e) => e.name === name)) return `A key named ${name} exists; revoke it first to replace it`;
  return undefined;
}

export function registerKeyRoutes(app: Hono, console: GatewayConsole): void {
  const { keys } = console.deps;
  const audit = (c: Context, action: 'key_added' | 'key_revoked', name: string, detail?: string) =>
    console.deps.audit.record({ action, outcome: 'ok', actor: 'console', origin: peerAddress(c), subject: name, detail });
  const frame = (c: Context) => sessionFrame(c, console.deps.version, 'keys', 'Keys');

  const list = (c: Context, error?: string, typed?: { name: string; shipPrefix: string }) => {
    const file = readKeyFile(keys.path);
    const counters = new Map(keys.counters.list().map((k) => [k.name, k]));
    const rows: KeyRow[] = [
      { name: DEFAULT_KEY_NAME, shipPrefix: null, inFile: false, counters: counters.get(DEFAULT_KEY_NAME) },
      ...file.entries.map((e) => ({ name: e.name, shipPrefix: e.shipPrefix ?? null, inFile: true, counters: counters.get(e.name) })),
    ];
    return renderPage(
      c,
      frame(c),
      <Keys
        keys={rows}
        path={keys.path}
        problems={file.problems}
        csrf={c.get('consoleSession').csrf}
        error={error}
        typed={typed}
        now={Date.now()}
      />,
      error === undefined ? 200 : 422,
    );
  };

  app.get(`${CONSOLE_PATH}/keys`, (c) => list(c));

  app.post(`${CONSOLE_PATH}/keys`, requireFormToken(), async (c) => {
    const body = await c.req.parseBody({ all: true });
    const name = field(body, 'name');
    const shipPrefix = field(body, 'ship_prefix');
    const file = readKeyFile(keys.path);
    const refusal = refusalOf(name, shipPrefix, file.entries);
    if (refusal !== undefined) return list(c, refusal, { name, shipPrefix });
    const key = generateKey();
    writeKeyFile(keys.path, [...file.entries, { name, hash: hashKey(key), ...(shipPrefix === '' ? {} : { shipPrefix }) }]);
    keys.reload();
    audit(c, 'key_added', name, shipPrefix === '' ? 'all ships' : `ships starting with ${shipPrefix}`);
    const addresses = addressesFor(c, console);
    const host = addresses.hosts[0]!;
    const snippet = deviceSnippet({
      name,
      key,
      shipPrefix: shipPrefix === '' ? undefined : shipPrefix,
      url: `${httpsUrl(host, console.httpsPort)}/api/v2/ingest`,
      fingerprintSha256: console.deps.certificate().fingerprintSha256,
    });
    return renderPage(
      c,
      frame(c),
      <KeyCreated
        name={name}
        secret={key}
        shipPrefix={shipPrefix === '' ? undefined : shipPrefix}
        snippet={snippet}
        qrSvg={qrSvg(snippet)}
        localOnly={addresses.thisMachineOnly ? console.deps.listenHost : undefined}
      />,
      201,
    );
  });

  app.post(`${CONSOLE_PATH}/keys/revoke`, requireFormToken(), async (c) => {
    const body = await c.req.parseBody({ all: true });
    const name = field(body, 'name');
    const file = readKeyFile(keys.path);
    if (!file.entries.some((e) => e.name === name)) return list(c, `There is no key named ${name} in the key file`);
    if (body['confirm'] !== 'yes') {
      return renderPage(
        c,
        frame(c),
        <Confirm
          question={`Revoke the key ${name}?`}
          detail="Devices using it are refused (401) within seconds. Its readings already accepted stay queued and are delivered."
          action={`${CONSOLE_PATH}/keys/revoke`}
          fields={[['name', name]]}
          confirmLabel={`Revoke ${name}`}
          cancelHref={`${CONSOLE_PATH}/keys`}
          csrf={c.get('consoleSession').csrf}
        />,
      );
    }
    writeKeyFile(
      keys.path,
      file.entries.filter((e) => e.name !== name),
    );
    // Applied before the answer: open MQTT sessions on the key are closed by now.
    keys.reload();
    audit(c, 'key_revoked', name);
    flash(c, 'keys', `Key ${name} revoked: the gateway no longer accepts it.`);
    return c.redirect(`${CONSOLE_PATH}/keys`, 303);
  });
}
