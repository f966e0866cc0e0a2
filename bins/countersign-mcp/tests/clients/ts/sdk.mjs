// Loads modules of the installed TypeScript SDK: `COUNTERSIGN_TEST_NODE_SDK` names the folder
// whose node_modules holds @modelcontextprotocol/sdk (and zod), installed by .ci/run; these
// scripts live in the repository, away from that folder, so bare imports would not find it.
import { createRequire } from 'node:module';
import { join } from 'node:path';

const dir = process.env.COUNTERSIGN_TEST_NODE_SDK;
if (!dir) {
    throw new Error('COUNTERSIGN_TEST_NODE_SDK is not set');
}
const require = createRequire(join(dir, 'package.json'));

/** `@modelcontextprotocol/sdk/<path>` (CommonJS build) or any other package of that folder. */
export function load(name) {
    return require(name);
}
