// The formal model's own tool check (scripts/require-tools.mjs, npm's pretest, checks every system
// tool npm test needs and installs them when it can): says at once which tool of the model's checks
// is missing and how to install it, instead of eight conformance tests failing with
// "spin ... failed (null)" minutes later. Exit 2 when one is missing.
import { requireTools } from './pan.mjs';

requireTools();
