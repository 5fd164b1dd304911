// Preloaded with --import into a gateway under test (in both of its threads): the URL of every
// module Node loads is appended to the file HARBOR_LOADED_MODULES names, one a line.
import { register } from 'node:module';

const file = process.env.HARBOR_LOADED_MODULES;
if (file !== undefined) register(new URL('./loaded-modules-hooks.mjs', import.meta.url), { data: { file } });
