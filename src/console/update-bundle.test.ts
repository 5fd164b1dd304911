import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { PartReader, boundaryOf, saveMultipartFile } from './multipart-file.js';
import { ROLLBACK_REQUEST, UPLOAD_BUNDLE, UPLOAD_VERDICT, folderInstaller } from './update-bundle.js';

/** A browser's upload of the update form: the form token and the file, as multipart/form-data. */
function uploadRequest(bundle: Buffer, fields: [string, string][] = [['_csrf', 'token-0123']]): Request {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value);
  form.append('bundle', new Blob([bundle]), 'harbor-update.raucb');
  return new Request('https://gateway.test/console/update', { method: 'POST', body: form });
}

/** The body bytes of a request, fed to a reader in pieces of the given size. */
async function partsOf(request: Request, piece: number) {
  const body = Buffer.from(await request.arrayBuffer());
  const reader = new PartReader(boundaryOf(request.headers.get('content-type')) ?? '');
  const events = [];
  for (let at = 0; at < body.length; at += piece) events.push(...reader.push(body.subarray(at, at + piece)));
  return { reader, events };
}

describe('the console update upload', () => {
  it('reads the parts of a form whatever the size of the pieces it arrives in', async () => {
    // Bytes that look like the start of a delimiter inside the file.
    const bundle = Buffer.concat([randomBytes(5000), Buffer.from('\r\n--not-the-boundary\r\n--'), randomBytes(3000)]);
    for (const piece of [1, 7, 64, 4096, 1 << 20]) {
      const { reader, events } = await partsOf(uploadRequest(bundle), piece);
      expect(reader.done).toBe(true);
      const data = Buffer.concat(events.flatMap((e) => (e.type === 'data' ? [e.data] : [])));
      expect(data.subarray(data.length - bundle.length).equals(bundle)).toBe(true);
      expect(events.filter((e) => e.type === 'headers')).toHaveLength(2);
      expect(events.filter((e) => e.type === 'end')).toHaveLength(2);
    }
  });

  it('streams the bundle field to a file and names what is wrong with a bad form', async () => {
    const dir = tempDir('upload');
    const bundle = randomBytes(200_000);
    const file = join(dir, 'bundle');
    expect(await saveMultipartFile({ request: uploadRequest(bundle), field: 'bundle', destination: file, maxBytes: 1 << 20 })).toEqual({
      bytes: bundle.length,
    });
    expect(readFileSync(file).equals(bundle)).toBe(true);

    const tooLarge = await saveMultipartFile({ request: uploadRequest(bundle), field: 'bundle', destination: file, maxBytes: 1000 });
    expect(tooLarge).toEqual({ problem: 'bundle is larger than 1000 bytes' });
    // Fields other than the one asked for are small (a form token): a large one is refused.
    const other = await saveMultipartFile({ request: uploadRequest(bundle), field: 'firmware', destination: file, maxBytes: 1 << 20 });
    expect(other).toEqual({ problem: 'the form field bundle is too large' });
    const small = await saveMultipartFile({
      request: uploadRequest(Buffer.from('x')),
      field: 'firmware',
      destination: file,
      maxBytes: 1 << 20,
    });
    expect(small).toEqual({ problem: 'the form holds no firmware' });
    const plain = new Request('https://gateway.test/console/update', {
      method: 'POST',
      body: 'x=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(await saveMultipartFile({ request: plain, field: 'bundle', destination: file, maxBytes: 1 << 20 })).toEqual({
      problem: 'the request is not multipart/form-data with a boundary',
    });
    const cut = uploadRequest(bundle);
    const truncated = new Request(cut.url, {
      method: 'POST',
      body: Buffer.from(await cut.arrayBuffer()).subarray(0, 150_000),
      headers: { 'content-type': cut.headers.get('content-type') ?? '' },
    });
    expect(await saveMultipartFile({ request: truncated, field: 'bundle', destination: file, maxBytes: 1 << 20 })).toEqual({
      problem: 'the upload ended before the form did (connection lost?)',
    });
  });

  it("hands a complete upload to the updater and tells its verdict; a refused bundle's answer says why", async () => {
    const folder = tempDir('update-upload');
    // The updater's side (harbor-update install-upload on the appliance): it takes the bundle away and answers.
    const seen: Buffer[] = [];
    // Polled rather than watched: inotify is not on every file system a test runs on.
    const updater = setInterval(() => {
      const bundle = join(folder, UPLOAD_BUNDLE);
      if (!existsSync(bundle)) return;
      seen.push(readFileSync(bundle));
      writeFileSync(bundle, '');
      writeFileSync(
        join(folder, UPLOAD_VERDICT),
        JSON.stringify({ state: 'refused', message: "Refused, nothing was written: the bundle's signature or format was refused." }),
      );
    }, 20);
    try {
      const installer = folderInstaller({ folder, verdictWaitMs: 20_000 });
      const bundle = randomBytes(100_000);
      const outcome = await installer.install(uploadRequest(bundle));
      expect(outcome).toEqual({ ok: false, message: "Refused, nothing was written: the bundle's signature or format was refused." });
      expect(seen[0]?.equals(bundle)).toBe(true);
      expect(readdirSync(folder).filter((name) => name.endsWith('.part'))).toEqual([]);
    } finally {
      clearInterval(updater);
    }
  });

  it('writes nothing for the updater when the upload is incomplete', async () => {
    const folder = tempDir('update-upload');
    const installer = folderInstaller({ folder, verdictWaitMs: 1000 });
    const request = new Request('https://gateway.test/console/update', {
      method: 'POST',
      body: '--b\r\nContent-Disposition: form-data; name="bundle"; filename="x"\r\n\r\npartial',
      headers: { 'content-type': 'multipart/form-data; boundary=b' },
    });
    const outcome = await installer.install(request);
    expect(outcome.ok).toBe(false);
    expect(outcome.message).toMatch(/^The upload was not taken: the upload ended before the form did/);
    expect(readdirSync(folder)).toEqual([]);
  });

  it('reads the releases the updater describes, and nothing it cannot trust', () => {
    const folder = tempDir('update-upload');
    const releasesFile = join(tempDir('run'), 'release.json');
    const installer = folderInstaller({ folder, releasesFile });
    expect(installer.releases()).toBeUndefined();
    const releases = {
      version: '0.5.0',
      slot: 'B',
      trial: false,
      previous: { version: '0.4.0', slot: 'A' },
      previousUnavailable: null,
      lastUpdate: '0.4.0 -> 0.5.0, confirmed (2026-11-26 10:00 UTC)',
    };
    writeFileSync(releasesFile, JSON.stringify(releases));
    expect(installer.releases()).toEqual(releases);
    writeFileSync(releasesFile, JSON.stringify({ ...releases, previous: '0.4.0' }));
    expect(installer.releases()).toBeUndefined();
  });

  it('asks the updater to go back to the release the page offered and tells its verdict', async () => {
    const folder = tempDir('update-upload');
    const asked: string[] = [];
    const updater = setInterval(() => {
      const request = join(folder, ROLLBACK_REQUEST);
      if (!existsSync(request)) return;
      asked.push(readFileSync(request, 'utf8'));
      rmSync(request);
      writeFileSync(join(folder, UPLOAD_VERDICT), JSON.stringify({ state: 'installing', message: 'Going back to 0.4.0 (slot A).' }));
    }, 20);
    try {
      const outcome = await folderInstaller({ folder, verdictWaitMs: 20_000 }).rollBack('0.4.0');
      expect(outcome).toEqual({ ok: true, message: 'Going back to 0.4.0 (slot A).' });
      expect(asked.map((text) => JSON.parse(text))).toEqual([{ to: '0.4.0' }]);
    } finally {
      clearInterval(updater);
    }
    const unanswered = await folderInstaller({ folder, verdictWaitMs: 200 }).rollBack('0.4.0');
    expect(unanswered.message).toMatch(/has not answered yet.*screen/);
  });
});
