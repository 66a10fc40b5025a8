// Lets the conformance suite, built for Node 22, run on Node 20: its
// report code imports fs.globSync, which Node 20 lacks and the client
// scenarios never call. Loaded with node --import ./node20.mjs.
import { register } from 'node:module';

register('./node20-hook.mjs', import.meta.url);
