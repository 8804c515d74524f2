/*
 * Tessera's prefix lease protocol (issue 34's cluster-wide prefix store), as a Promela model
 * for the SPIN model checker, beside tessera.pml (the KV transfer) and in its conventions.
 *
 * Owns: a requester R (a prefill that misses a tenant's prefix) fetching cached prefix pages
 * from a holder H whose small pool is evicted and reused while it serves, two tenants whose
 * prompts have identical tokens (so the same chained pathHashes), leases taken and released
 * on done, on R's connection close and at the lease deadline, R's fetch deadline and restart,
 * the late frames of an abandoned fetch, and R's checks on every frame.
 * Must never: model a behaviour the code does not have under the same name. The names are
 * those of src/transfer/prefix-fetch-*.ts and src/pages/lease.ts (see README.md, "The prefix
 * lease model").
 *
 * The protocol:
 *   1. R -> H  PrefixFetch{fetchId, epoch, namespace, pathHashes[K]}: fetchId counts from 1
 *      in each epoch of R (a new epoch at a restart)
 *   2. H looks each (namespace, pathHash) up, stops at the first miss, and takes a LEASE on
 *      the run found: each leased page is pinned (a count: several leases may pin one page),
 *      so eviction can neither free nor reuse it until the lease ends.
 *   3. H -> R  PrefixPages{fetchId, epoch, namespace, index, pathHash, xxh64, bytes}, one page
 *      a frame, in order; then PrefixDone{fetchId, epoch, count}, and H releases the lease as
 *      the last byte is handed to the transport; or at R's connection close; or at the lease
 *      deadline (whichever first; after a release H sends nothing more of that fetch).
 *   4. R accepts a page only if fetchId and epoch name its open fetch, the namespace is the one
 *      it asked for, the index is the next one and the pathHash the one asked at that index;
 *      it installs it as a cached page of that tenant. Anything else of the open fetch ends it
 *      (the rest is a miss); a frame of no open fetch (late: of a fetch R abandoned at its
 *      deadline, or of an older epoch) is dropped.
 *
 * Page bytes are modelled by their identity: (owner namespace, version). Every write of a
 * page (an allocation that reuses it) takes a fresh version, so "the same bytes" is "the same
 * version". H computes the xxh64 over the bytes it sends, so the checksum cannot tell a
 * reused page from the leased one: only the lease can (and the model's frames are intact).
 *
 * Invariants (assert = safety; ltl = liveness):
 *   (I1) the bytes R installs at position i of a fetch are the bytes the page H leased for
 *        that position held when the lease was taken (no evict-and-reuse during the read);
 *   (I2) R never installs bytes of a page keyed by another namespace than the fetch's;
 *   (I3) every lease ends and unpins its pages: no page pinned for ever (ltl `released`, and
 *        the monitor's assertion in every final state).
 *
 * Mutants (compile with -D<NAME>; spec/scripts/mutants.mjs checks each is caught):
 *   IGNORE_PREFIX_LEASE        H does not pin (fault point ignore-prefix-lease)         (I1)
 *   PREFIX_KEY_WITHOUT_TENANT  H looks pages up by pathHash alone
 *                              (fault point prefix-key-without-tenant)                  (I2)
 *   SEND_AFTER_LEASE_TIMEOUT   H goes on sending a fetch whose lease timed out          (I1)
 *   LEASE_LEAK_ON_CLOSE        H ends a lease at R's close without unpinning            (I3)
 *   ACCEPT_STALE_FRAMES        R accepts a frame without checking fetchId and epoch     (I1)
 */

/* ---------------------------------------------------------------- sizes (-D to change) */
#ifndef NF
#define NF 2              /* fetches R makes, one after the other (model slot f; fetchId per epoch) */
#endif
#ifndef MAXREUSE
#define MAXREUSE 2        /* allocations at H that write a page (each takes a free or unpinned page) */
#endif
#ifndef MAXF
#define MAXF 2            /* faults per run: R's connection closes, R restarts (new epoch, fetchIds
                             from 1 again), an early deadline at R, an early lease timeout at H */
#endif
#define K 2               /* pathHashes a fetch asks for */
#define NPG 3             /* pages in H's pool */
#define HRCAP 2           /* frames in flight H -> R (one connection: in order) */

/* ---------------------------------------------------------------- names */
#define NS_A 1            /* namespaces (tenant + model fingerprint + KV layout + adapter) */
#define NS_B 2
#define PH(i) ((i) + 1)   /* pathHash of position i of the prompt both tenants send */
#define PH_OTHER 3        /* another prompt's page */

#define PG_free 0         /* H's pages */
#define PG_cached 1

#define L_none 0          /* H's lease for fetch slot f */
#define L_held 1
#define L_ended 2         /* released; its record cleared (so the state space stays small) */
#define L_unpinned 3      /* only in mutant SEND_AFTER_LEASE_TIMEOUT: timed out, still sending */
#define WHY_done 1        /* why a lease ends: the last byte handed to the transport, */
#define WHY_closed 2      /* R's connection closed, */
#define WHY_timeout 3     /* its deadline */

#define F_none 0          /* R's fetch slot f (FetchOutcome.ended in prefix-fetch-requester.ts) */
#define F_open 1
#define F_done 2          /* PrefixDone with the count of pages accepted */
#define F_refused 3       /* a frame of the fetch failed a check ('namespace', 'order', 'path'): the rest is a miss */
#define F_ended 4         /* 'timeout' (R's deadline) or 'closed' (the connection, or R's restart) */

mtype = { PrefixPages, PrefixDone };

/* ---------------------------------------------------------------- state */
/* H's pool and its prefix index: a cached page is keyed (pgns, pgph), each key at most once. */
byte pgst[NPG];
byte pgns[NPG];           /* the namespace the page is cached under (whose bytes it holds) */
byte pgph[NPG];
byte pgver[NPG];          /* the bytes' version: fresh at every write */
byte pin[NPG];            /* open leases holding the page */
byte nver;                /* versions used */
byte reuses;

/* H's lease of each fetch (slot f; H serves several at once) */
byte lst[NF];
byte lconn[NF];           /* the connection the fetch came on */
byte lfid[NF];            /* the fetch's fetchId, epoch and namespace, echoed in every frame */
byte lep[NF];
byte lns[NF];
byte lcount[NF];          /* pages leased (the leading run found) */
byte lsent[NF];           /* PrefixPages frames handed to the transport */
byte lpage[NF * K];       /* the page leased for position i ... */
byte lsnap[NF * K];       /* ... and its bytes' version when the lease was taken (ghost of I1) */

/* R */
byte conn = 1;            /* R's connection to H: a new one after a close */
byte ep = 1;              /* R's epoch: a new one at a restart */
byte nid = 1;             /* R's next fetchId (from 1 again after a restart) */
byte rf;                  /* R's current fetch slot (rf == NF: all made) */
byte fst[NF];
byte fns[NF];             /* the namespace fetch f asked for */
byte fid[NF];
byte fep[NF];
byte fgot[NF];            /* pages accepted (and installed) */
byte faults;
#define MAY_FAULT (faults < MAXF)

/* PrefixFetch{fetchId, epoch, namespace, pathHashes = PH(0..K-1)}, with the model's slot (a ghost) */
chan rh = [NF] of { byte, byte, byte, byte };
/* PrefixPages{fetchId, epoch, namespace, index, pathHash, -, bytes: owner, version} and
 * PrefixDone{fetchId, epoch, -, -, -, count}; H computes the xxh64 over the bytes it sends */
chan hr = [HRCAP] of { mtype, byte, byte, byte, byte, byte, byte, byte, byte };

/* Scratch for one d_step (always 0 in a stored state: every d_step that uses them ends with
 * CLR). m_* hold a received message; bytes_ns and bytes_ver a page's bytes. */
byte hi, hp, hok, hf, m_fid, m_ep, m_ns, m_idx, m_ph, m_count, bytes_ns, bytes_ver;
mtype m_kind;
#define CLR hi = 0; hp = 0; hok = 0; hf = 0; m_fid = 0; m_ep = 0; m_ns = 0; m_idx = 0; m_ph = 0; \
            m_count = 0; bytes_ns = 0; bytes_ver = 0; m_kind = 0

/* Witnesses: spec:check compiles with -DWITNESS=k and expects pan to reach point k. */
#ifdef WITNESS
#define SEEN(k, cond) if :: (WITNESS == k) && (cond) -> assert(false) :: else -> skip fi
#else
#define SEEN(k, cond) skip
#endif

/* ---------------------------------------------------------------- H: lookup, lease, release */
#ifdef PREFIX_KEY_WITHOUT_TENANT
#define KEY_IS(p, ns, ph) (pgph[p] == (ph))                       /* MUTANT: no namespace */
#else
#define KEY_IS(p, ns, ph) (pgns[p] == (ns) && pgph[p] == (ph))
#endif
#ifdef IGNORE_PREFIX_LEASE
#define PIN(p) skip                                               /* MUTANT: nothing pinned */
#else
#define PIN(p) pin[p]++
#endif
#define CACHED(p, ns, ph) (pgst[p] == PG_cached && pgns[p] == (ns) && pgph[p] == (ph))
#define HAS_KEY(ns, ph) (CACHED(0, ns, ph) || CACHED(1, ns, ph) || CACHED(2, ns, ph))

/* PrefixFetch for slot f arrives: look (namespace, PH(i)) up for i = 0, 1, ..., stop at the first
 * miss, pin the run found, and remember each page's bytes as they are now (the ghost of I1). */
inline h_lease(f) {
  lst[f] = L_held; lcount[f] = 0; lsent[f] = 0;
  SEEN(7, lns[f] == NS_B && HAS_KEY(NS_A, PH(0)) && !HAS_KEY(NS_B, PH(0)));
  hi = 0;
  do
  :: hi == K -> break
  :: else ->
     hp = 0; hok = 0;
     do
     :: hp == NPG -> break
     :: hp < NPG && pgst[hp] == PG_cached && KEY_IS(hp, lns[f], PH(hi)) -> hok = 1; break
     :: else -> hp++
     od;
     if
     :: hok -> lpage[f * K + hi] = hp; lsnap[f * K + hi] = pgver[hp]; PIN(hp); lcount[f]++; hi++
     :: else -> break
     fi
  od;
  SEEN(6, (pin[0] > 1) || (pin[1] > 1) || (pin[2] > 1))
}

/* The lease's record is gone; so is the ghost of I1 once R has ended the fetch too. */
inline h_clear(f) {
  lst[f] = L_ended; lconn[f] = 0; lfid[f] = 0; lep[f] = 0; lns[f] = 0; lsent[f] = 0;
  lpage[f * K] = 0; lpage[f * K + 1] = 0; lcount[f] = 0;
  if
  :: fst[f] != F_open -> lsnap[f * K] = 0; lsnap[f * K + 1] = 0
  :: else -> skip
  fi
}

#ifdef LEASE_LEAK_ON_CLOSE
#define UNPINS(why) ((why) != WHY_closed)                          /* MUTANT: left pinned at a close */
#else
#define UNPINS(why) (1)
#endif

/* The lease ends (once): its pages are unpinned (pin counts: another lease may still hold one). */
inline h_release(f, why) {
  hi = 0;
  do
  :: hi == lcount[f] -> break
  :: else ->
#ifndef IGNORE_PREFIX_LEASE
     if
     :: lst[f] == L_held && UNPINS(why) -> assert(pin[lpage[f * K + hi]] > 0); pin[lpage[f * K + hi]]--
     :: else -> skip
     fi;
#endif
     hi++
  od;
#ifdef SEND_AFTER_LEASE_TIMEOUT
  if
  :: why == WHY_timeout && lsent[f] < lcount[f] -> lst[f] = L_unpinned   /* MUTANT: the send loop goes on */
  :: else -> h_clear(f)
  fi
#else
  h_clear(f)
#endif
}

#ifdef SEND_AFTER_LEASE_TIMEOUT
#define SENDING(f) (lst[f] == L_held || lst[f] == L_unpinned)
#else
#define SENDING(f) (lst[f] == L_held)
#endif

/* H's steps for the lease of slot f: send the next page (its bytes as they are now), or
 * PrefixDone and release; release when R's connection has closed, or at the deadline (early:
 * a fault; or when nothing else can happen). After a release nothing more of f is sent. */
#define H_SERVE(f) \
  :: d_step { SENDING(f) && lconn[f] == conn && lsent[f] < lcount[f] && nfull(hr) -> \
       hp = lpage[f * K + lsent[f]]; \
       hr!PrefixPages(lfid[f], lep[f], lns[f], lsent[f], PH(lsent[f]), 0, pgns[hp], pgver[hp]); \
       lsent[f]++; CLR } \
  :: d_step { lst[f] == L_held && lconn[f] == conn && lsent[f] == lcount[f] && nfull(hr) -> \
       hr!PrefixDone(lfid[f], lep[f], 0, 0, 0, lcount[f], 0, 0); \
       h_release(f, WHY_done); CLR } \
  :: d_step { SENDING(f) && lconn[f] != conn -> SEEN(4, 1); h_release(f, WHY_closed); CLR } \
  :: d_step { lst[f] == L_held && MAY_FAULT -> \
       faults++; SEEN(5, lsent[f] < lcount[f]); h_release(f, WHY_timeout); CLR } \
  :: d_step { lst[f] == L_held && timeout -> h_release(f, WHY_timeout); CLR } \
  :: d_step { lst[f] == L_unpinned && lsent[f] == lcount[f] -> h_clear(f); CLR }

proctype holder() {
end:
  do
  :: d_step { rh?m_fid, m_ep, m_ns, hf ->
       lconn[hf] = conn; lfid[hf] = m_fid; lep[hf] = m_ep; lns[hf] = m_ns; h_lease(hf); CLR }
  H_SERVE(0)
  H_SERVE(1)
#if NF > 2
  H_SERVE(2)
#endif
  od;
  skip
}

/* H's pool under pressure: another request at H computes a prefix and allocates a page for it,
 * a free one or, by eviction, any cached page no lease pins (the LRU order is abstracted: any
 * unpinned page may be the victim); the page gets fresh bytes under its new key. The new keys:
 * tenant B's page of the same tokens (the same pathHash), and a page of another prompt of A's. */
#define REUSE(p, ns, ph) \
  :: d_step { reuses < MAXREUSE && !HAS_KEY(ns, ph) && (pgst[p] == PG_free || pin[p] == 0) -> \
       reuses++; nver++; pgst[p] = PG_cached; pgns[p] = ns; pgph[p] = ph; pgver[p] = nver }

proctype evictor() {
end:
  do
  REUSE(0, NS_B, PH(0)) REUSE(1, NS_B, PH(0)) REUSE(2, NS_B, PH(0))
  REUSE(0, NS_A, PH_OTHER) REUSE(1, NS_A, PH_OTHER) REUSE(2, NS_A, PH_OTHER)
  od;
  skip
}

/* ---------------------------------------------------------------- R */
/* R ends its open fetch; what it no longer needs is cleared (the ghost of I1 too, once H's lease
 * has ended). A frame of the fetch that arrives later is stale. */
inline r_end(why) {
  fst[rf] = why; fns[rf] = 0; fid[rf] = 0; fep[rf] = 0; fgot[rf] = 0;
  if
  :: lst[rf] == L_ended -> lsnap[rf * K] = 0; lsnap[rf * K + 1] = 0
  :: else -> skip
  fi;
  rf++
}

#ifdef ACCEPT_STALE_FRAMES
#define OF_OPEN_FETCH (rf < NF && fst[rf] == F_open)               /* MUTANT: fetchId, epoch unchecked */
#else
#define OF_OPEN_FETCH (rf < NF && fst[rf] == F_open && m_fid == fid[rf] && m_ep == fep[rf])
#endif

/* A frame arrives (in m_*, bytes_*): R's checks, then accept (install), end the fetch, or drop.
 * The checks of length and xxh64 always pass in the model (its frames are intact). */
inline r_frame() {
  if
  :: OF_OPEN_FETCH ->
     if
     :: m_kind == PrefixPages && m_ns == fns[rf] && m_idx == fgot[rf] && m_idx < K && m_ph == PH(m_idx) ->
        SEEN(3, pgver[0] != bytes_ver && pgver[1] != bytes_ver && pgver[2] != bytes_ver);
        assert(bytes_ver == lsnap[rf * K + m_idx]);               /* (I1) */
        assert(bytes_ns == fns[rf]);                              /* (I2) */
        fgot[rf]++
     :: m_kind == PrefixDone && m_count == fgot[rf] -> SEEN(1, fgot[rf] == K); r_end(F_done)
     :: else -> r_end(F_refused)
     fi
  :: else ->                                                      /* stale: dropped */
     SEEN(2, m_kind == PrefixPages && rf < NF && fst[rf] == F_open);
     SEEN(8, m_kind == PrefixPages && rf < NF && fst[rf] == F_open && m_fid == fid[rf])
  fi
}

proctype requester() {
end:
  do
  :: atomic { rf < NF && fst[rf] == F_none ->                     /* a miss: fetch a tenant's prefix */
       if
       :: fns[rf] = NS_A
       :: fns[rf] = NS_B
       fi;
       fst[rf] = F_open; fid[rf] = nid; nid++; fep[rf] = ep; rh!fid[rf], ep, fns[rf], rf }
  /* the deadline: early (a fault), or when nothing else can happen */
  :: d_step { rf < NF && fst[rf] == F_open && MAY_FAULT -> faults++; r_end(F_ended) }
  :: d_step { rf < NF && fst[rf] == F_open && timeout -> r_end(F_ended) }
  :: d_step { hr?m_kind, m_fid, m_ep, m_ns, m_idx, m_ph, m_count, bytes_ns, bytes_ver -> r_frame(); CLR }
  od;
  skip
}

/* R's connection to H closes, or R restarts (its connection closes too; a new epoch, fetchIds
 * from 1 again). H sees the close; R ends its open fetch ('closed'); fetches H has not read are
 * lost. Frames H already sent are still delivered (conservative: R's checks must drop them). */
inline close_connection() {
  conn++;
  do
  :: rh?m_fid, m_ep, m_ns, hf
  :: empty(rh) -> break
  od;
  if
  :: rf < NF && fst[rf] == F_open -> r_end(F_ended)
  :: else -> skip
  fi
}

proctype connection() {
end:
  do
  :: d_step { MAY_FAULT -> faults++; close_connection(); CLR }
  :: d_step { MAY_FAULT -> faults++; close_connection(); ep++; nid = 1; CLR }
  od;
  skip
}

/* ---------------------------------------------------------------- the end */
#if NF > 2
#define NO_LEASE_HELD (lst[0] != L_held && lst[1] != L_held && lst[2] != L_held)
#else
#define NO_LEASE_HELD (lst[0] != L_held && lst[1] != L_held)
#endif
#define NO_PIN (pin[0] == 0 && pin[1] == 0 && pin[2] == 0)
#define LEASES_ENDED (NO_LEASE_HELD && NO_PIN)

/* (I3) when nothing can happen any more, every lease has ended and no page is pinned */
proctype monitor() {
  timeout -> assert(LEASES_ENDED)
}

#ifndef NO_LTL
ltl released { <> [] LEASES_ENDED }
#endif

init {
  atomic {
    /* tenant A's prompt is cached at H (two pages, pathHashes PH(0), PH(1)); tenant B sent the
     * same tokens: its first page is cached too, or not */
    pgst[0] = PG_cached; pgns[0] = NS_A; pgph[0] = PH(0); pgver[0] = 1;
    pgst[1] = PG_cached; pgns[1] = NS_A; pgph[1] = PH(1); pgver[1] = 2;
    if
    :: pgst[2] = PG_cached; pgns[2] = NS_B; pgph[2] = PH(0); pgver[2] = 3
    :: skip
    fi;
    nver = 3;
    run holder(); run evictor(); run requester(); run connection(); run monitor()
  }
}
