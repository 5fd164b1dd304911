// The HTTP floor: a Hono app on @hono/node-server whose handlers only read and parse the body and
// answer the gateway's JSON, no validation, no key, no queue. What single and batch push cost above
// it is the gateway's.
import { spawn } from 'node:child_process';
import { freePort } from '../../scripts/lib/ports.mjs';
import { projectRoot } from '../../scripts/lib/paths.mjs';
import { GATEWAY_GLIBC_TUNABLES, GATEWAY_NODE_OPTIONS } from '../../scripts/lib/node-options.mjs';

const SOURCE = `
  import { Hono } from 'hono';
  import { serve } from '@hono/node-server';
  const app = new Hono();
  app.post('/api/v2/ingest/', async (c) => {
    const reading = JSON.parse(await c.req.text());
    return c.json({ status: 'Data received and queued', ship_id: reading.ship_id, cargo_id: reading.cargo_id });
  });
  app.post('/api/v2/ingest/batch', async (c) => {
    const readings = JSON.parse(await c.req.text());
    return c.json({ status: 'Batch data received and queued', count: readings.length });
  });
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: Number(process.env.PORT) }, () => process.stdout.write('listening\\n'));
  // An exit of its own on SIGTERM, so that --cpu-prof writes its profile.
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
`;

/**
 * Starts the floor as its own process pinned to `cpus`, with the gateway's V8 and malloc settings
 * (so it differs from the gateway only in the handler) and `nodeArgs` besides.
 * @param {{ cpus: string, nodeArgs?: string[] }} options
 * @returns {Promise<{ url: string, batchUrl: string, stop: () => Promise<void> }>}  the single and batch push endpoints
 */
export async function startFloorServer(options) {
  const port = await freePort();
  const child = spawn(
    'taskset',
    [
      '-c',
      options.cpus,
      process.execPath,
      ...GATEWAY_NODE_OPTIONS.split(' '),
      ...(options.nodeArgs ?? []),
      '--input-type=module',
      '-e',
      SOURCE,
    ],
    {
      cwd: projectRoot,
      env: { ...process.env, PORT: String(port), GLIBC_TUNABLES: GATEWAY_GLIBC_TUNABLES },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => String(chunk).includes('listening') && resolve(undefined));
    child.once('exit', (code) => reject(new Error(`floor server exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/api/v2/ingest/`,
    batchUrl: `http://127.0.0.1:${port}/api/v2/ingest/batch`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
