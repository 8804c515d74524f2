// `npm test`'s first step (npm's pretest): says at once which tool of the formal model's checks
// is missing and how to install it, instead of eight conformance tests failing with
// "spin ... failed (null)" minutes later. Exit 2 when one is missing.
import { requireTools } from './pan.mjs';

requireTools();
