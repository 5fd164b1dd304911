import { spawnSync } from 'node:child_process';
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, expect } from 'vitest';
import { gatewayEnv, spawnGateway, type GatewayProcess } from './process.js';
import { tempDir } from './temp-dir.js';

/** The built gateway of a TLS test, in a directory of its own, with both of its ports. */
export interface TlsGateway {
  gw: GatewayProcess;
  /** The test's directory: the gateway's `DATA_DIR` is `data` in it, certificate files lie beside. */
  dir: string;
  dataDir: string;
  /** Plain HTTP, and TLS told apart by the first byte. */
  port: number;
  httpsPort: number;
}

/** An operator's certificate pair in `dir`, as openssl makes it. */
export interface OperatorCertificate {
  certFile: string;
  keyFile: string;
  /** Makes a new pair and renames it into place, as deployment tools replace certificates. */
  make(keyAlgorithm: string[], commonName: string): void;
}

export function operatorCertificate(dir: string): OperatorCertificate {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  return {
    certFile,
    keyFile,
    make(keyAlgorithm, commonName) {
      const args = ['req', '-x509', ...keyAlgorithm, '-nodes', '-days', '30', '-subj', `/CN=${commonName}`];
      const result = spawnSync('openssl', [...args, '-keyout', `${keyFile}.new`, '-out', `${certFile}.new`], { encoding: 'utf8' });
      if (result.status !== 0) throw new Error(result.stderr);
      renameSync(`${keyFile}.new`, keyFile);
      renameSync(`${certFile}.new`, certFile);
    },
  };
}

/**
 * Starts the gateway before the test file's tests and stops it after them (SIGTERM, exit status 0).
 * `env` is added to the gateway's settings; as a function it runs first, in the test's directory,
 * to lay out certificate files the settings name.
 */
export function tlsGatewayForTests(
  label: string,
  env: Record<string, string> | ((dir: string) => Record<string, string>) = {},
): () => TlsGateway {
  let started: TlsGateway | undefined;
  beforeAll(async () => {
    const dir = tempDir(label);
    const dataDir = join(dir, 'data');
    const gw = await spawnGateway(gatewayEnv(label, { DATA_DIR: dataDir, ...(typeof env === 'function' ? env(dir) : env) }));
    const startLine = gw.logs.find((line) => line.event === 'started')!;
    const portOf = (address: unknown): number => Number(String(address).split(':').pop());
    started = { gw, dir, dataDir, port: portOf(startLine.address), httpsPort: portOf(startLine.httpsAddress) };
  });
  afterAll(async () => {
    if (started === undefined) return;
    started.gw.child.kill('SIGTERM');
    expect((await started.gw.exited).code).toBe(0);
  });
  return () => {
    if (started === undefined) throw new Error('the TLS test gateway has not started');
    return started;
  };
}

/** A TLS connection that accepts any certificate, as the devices' clients do. */
export function openTls(port: number, options: { ALPNProtocols?: string[] } = {}): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options }, () => resolve(socket));
    socket.once('error', reject);
  });
}
