// spec:check and spec:mutants judge a run by parsePan's reading of pan's report: a pass needs
// zero errors and a complete search; a mutant needs a counterexample of one of the properties.
import { describe, expect, it } from 'vitest';
import { classify } from '../../spec/scripts/mutants.mjs';
import { parsePan } from '../../spec/scripts/pan.mjs';

const PASSED = `
(Spin Version 6.5.2 -- 6 December 2019)
	+ Partial Order Reduction
	+ Compression

Full statespace search for:
	never claim         	- (none specified)
	assertion violations	+
	cycle checks       	- (disabled by -DSAFETY)
	invalid end states	+

State-vector 212 byte, depth reached 76, errors: 0
  8584139 states, stored
 33923414 states, matched
 42507553 transitions (= stored+matched)
      134 atomic steps
hash conflicts:   3934514 (resolved)

Stats on memory usage (in Megabytes):
 2030.000	equivalent memory usage for states (stored*(State-vector + overhead))
 1818.107	total actual memory usage

pan: elapsed time 80.3 seconds
`;

const VIOLATED = `
pan:1: assertion violated ((inflight[hp]==0)&&((((pst[r]==2)||(pst[r]==4))||(pst[r]==5))||dclosed[(((r%1)*2)+(r%2))])) (at depth 31)
pan: wrote tessera.pml.trail
Warning: Search not completed
State-vector 228 byte, depth reached 31, errors: 1
      167 states, stored
      190 transitions (= stored+matched)
  129.022	total actual memory usage
`;

const TRUNCATED = `
error: max search depth too small
State-vector 212 byte, depth reached 99, errors: 0
     1000 states, stored
     2000 transitions (= stored+matched)
  128.000	total actual memory usage
`;

describe('parsePan', () => {
  it('reads a passing exhaustive run: states, transitions, memory, no errors, complete', () => {
    const r = parsePan(PASSED);
    expect(r).toMatchObject({
      errors: 0,
      statesStored: 8584139,
      transitions: 42507553,
      depthReached: 76,
      memoryMb: 1818.107,
      complete: true,
      violation: undefined,
    });
  });

  it('reads a counterexample: the message, its depth, an incomplete search', () => {
    const r = parsePan(VIOLATED);
    expect(r.errors).toBe(1);
    expect(r.complete).toBe(false);
    expect(r.violation?.depth).toBe(31);
    expect(classify(r.violation?.message ?? '')).toMatch(/^\(c\)/);
  });

  it('refuses a search cut short by the depth limit, even with zero errors', () => {
    expect(parsePan(TRUNCATED)).toMatchObject({ errors: 0, truncated: true, complete: false });
  });

  it('classifies only the properties, not bookkeeping assertions', () => {
    expect(classify('assertion violated (((lstate[hp]==1)&&(lepoch[hp]==he))&&(stamp[hp]==he))')).toMatch(/^\(a\)/);
    expect(classify('assertion violated ((1!=1)|| !(doom[r]))')).toMatch(/^\(b\)/);
    expect(classify('assertion violated (rlen[r]<=2)')).toMatch(/^\(d\)/);
    expect(classify('acceptance cycle')).toMatch(/^\(e\)/);
    expect(classify('assertion violated (w[r].AbortAckPD<7)')).toBeNull();
  });
});
