import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';

// The unit project runs without QuestDB, Java or the bundle, in seconds: a unit test that starts a
// server or another program (a broker, a JVM) belongs to the integration project under test/.
const refuse = (what: string) => () => {
  throw new Error(`unit tests must not ${what}; move the test to test/ (the integration project)`);
};

net.Server.prototype.listen = refuse('listen on a port') as never;
for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const) {
  (childProcess as unknown as Record<string, unknown>)[name] = refuse(`start a process (${name})`);
}
syncBuiltinESMExports();
