// Prints the command that runs Docker Compose here, building Compose into the cache first when the
// machine has none (scripts/lib/compose-client.mjs does the work):
//   node scripts/compose-client.mjs
import { composeClient } from './lib/compose-client.mjs';

process.stdout.write(`${composeClient().join(' ')}\n`);
