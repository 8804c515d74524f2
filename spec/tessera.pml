/*
 * Tessera's KV transfer protocol, as a Promela model for the SPIN model checker.
 *
 * Owns: the protocol between router (R), prefill (P) and decode (D) nodes for a few
 * requests that compete for small page pools, under message loss, duplication and
 * reordering, aborts from every side at any point, a prefill crash, a prefill that claims
 * pages it never wrote, and one-sided writes that land later than their sender thinks.
 * Must never: model a behaviour the code does not have under the same name. Every state,
 * message and page action below is named as in src/transfer (see README.md, "Names").
 *
 * Life of a request (the happy path; aborts and faults branch off anywhere):
 *   1. R: admission against the context length; Reserve(rid) -> D            Reserving
 *   2. D: admission against its pool; allocate pages (new epochs); Reserved   AwaitingKv
 *   3. R: Prefill(rid, tags) -> P                                             Prefilling
 *   4. P: admission against its pool; compute; post one write per page        Computing
 *   5. the writes land in D's pages, unchecked by D, with their stamp        Receiving
 *   6. P: once every posted write has landed, KvDone -> D                     AwaitingAck
 *   7. D: stamps cover every page in the current epoch -> Ack -> P            Decoding
 *   8. P: frees its source pages                                              Released
 *   9. D: page check; read (a decode step); Tokens, Finished -> R; free       Finished
 *  10. R: tells the client success                                            Succeeded
 * Abort: R -> D, and R -> P while prefilling; D -> P (Abort); P -> D (AbortAck, only once
 *        every write it posted has landed); D -> R (AbortAck). D keeps the pages quarantined
 *        until P's AbortAck or the close of P's connection. A prefill that stops on its own
 *        (rejection, failure) tells D with an unsolicited AbortAck, and R with Rejected/Failed.
 *
 * Properties (assert = safety, checked everywhere; ltl = liveness):
 *   (a) a decode step reads only pages written for its own request in the current epoch;
 *   (b) no request that was rejected, aborted or failed is reported as a success, and a
 *       request too long for some side that no fault touched is reported as rejected;
 *   (c) no page is freed while a write into it (or out of it) may still land, and no write
 *       lands in a page not held for its request in its epoch;
 *   (d) admission before allocation: no page is allocated and no byte moves for a request
 *       that does not fit that side;
 *   (e) every request ends and every page returns to the free pool (ltl `done`, and the
 *       Monitor's assertion in every final state).
 *
 * Mutants (compile with -D<NAME>): PLACEHOLDER, FREE_BEFORE_ACK, NO_EPOCH_CHECK,
 * NO_COVERAGE, ACK_BEFORE_LANDED, NO_TOMBSTONE, SUCCESS_AFTER_CANCEL, DROP_ABORT_ACK.
 * Each is a few lines under #ifdef below; spec/scripts/mutants.mjs checks each is caught.
 */

/* ---------------------------------------------------------------- sizes (-D to change) */
#ifndef NR
#define NR 3              /* requests */
#endif
#ifndef NP
#define NP 2              /* prefill nodes */
#endif
#ifndef ND
#define ND 1              /* decode nodes */
#endif
#ifndef DPAGES
#define DPAGES 3          /* pages in each decode node's pool */
#endif
#ifndef PPAGES
#define PPAGES 2          /* pages in each prefill node's pool */
#endif
#ifndef CTX
#define CTX 4             /* the router's context length, in pages (deliberately > PPAGES) */
#endif
#ifndef MAXF
#define MAXF 2            /* faults per run: losses, duplicates, aborts, crash, placeholder-done */
#endif
#ifndef LEN0
#define LEN0 2            /* request lengths in pages; the last request's is chosen below */
#endif
#ifndef LEN1
#define LEN1 2
#endif
#ifndef LEN3
#define LEN3 1
#endif
#ifndef PN
#define PN(r) ((r) % NP)  /* the prefill node the router pairs with request r */
#endif
#ifndef DN
#define DN(r) ((r) % ND)  /* the decode node the router pairs with request r */
#endif

#define MAXLEN DPAGES                         /* longest page table a decode node can hold */
#define NPAGE (ND * DPAGES)
#define TAB(r, i) ((r) * MAXLEN + (i))
#define TOO_LONG(r) (rlen[r] > CTX || rlen[r] > DPAGES || rlen[r] > PPAGES)

/* ---------------------------------------------------------------- names (see README.md) */
#include "model/names.pml"

/* ---------------------------------------------------------------- state */
/* Messages in flight, per request, as counts (a bag: any one may be delivered next, so the
 * network reorders freely). Each counter has one sender and one receiver. */
#define WIRE_BITS 3           /* copies of one message in flight: at most 7 (sends, resends, duplicates) */
#define WIRE_MAX 7
typedef Wire {
  unsigned Reserve : WIRE_BITS;      /* R -> D */
  unsigned Reserved : WIRE_BITS;     /* D -> R */
  unsigned RejectedDR : WIRE_BITS;   /* D -> R  Rejected */
  unsigned RejectedPR : WIRE_BITS;   /* P -> R  Rejected */
  unsigned Prefill : WIRE_BITS;      /* R -> P */
  unsigned KvDone : WIRE_BITS;       /* P -> D */
  unsigned Ack : WIRE_BITS;          /* D -> P */
  unsigned Tokens : WIRE_BITS;       /* D -> R */
  unsigned Finished : WIRE_BITS;     /* D -> R */
  unsigned FailedDR : WIRE_BITS;     /* D -> R  Failed */
  unsigned FailedPR : WIRE_BITS;     /* P -> R  Failed */
  unsigned AbortRD : WIRE_BITS;      /* R -> D  Abort */
  unsigned AbortRP : WIRE_BITS;      /* R -> P  Abort (while prefilling, so P stops computing at once) */
  unsigned AbortDP : WIRE_BITS;      /* D -> P  Abort */
  unsigned AbortAckPD : WIRE_BITS;   /* P -> D  AbortAck: "I will never write rid's pages again" */
  unsigned AbortAckDR : WIRE_BITS    /* D -> R  AbortAck */
}
Wire w[NR];

byte rlen[NR];                /* prompt length in pages (config; the last one is chosen at start) */
byte rst[NR];                /* router state of each request */
byte dst[NR];                /* decode state */
byte pst[NR];                /* prefill state */
byte outcome[NR];            /* what the client was told, once */

/* decode nodes: the ledger and the stamps beside the page data */
byte lstate[NPAGE];          /* ledger: PG_* */
byte lepoch[NPAGE];          /* ledger: epoch, bumped at every allocation, never reused */
byte stamp[NPAGE];           /* written by the writer with the data: the epoch it wrote for
                                (0 = never written). Pages and stamps are never zeroed. */
byte dfree[ND];              /* free pages per decode node (= count of PG_free) */
byte tpage[NR * MAXLEN];     /* D's page table of each request: page ... */
byte tepoch[NR * MAXLEN];    /* ... and the epoch it was allocated in (the tags) */
bit dchecked[NR];            /* D: the page check of the current decode step passed */

/* prefill nodes */
byte pfree[NP];              /* free source pages per prefill node */
byte posted[NR];             /* P: writes posted so far */
byte wr[NR];                 /* posted writes of each request that have not landed yet
                                (bit i = page i); P learns of each landing (completion) */
bit shortw[NR];              /* P is placeholder-done for this request (a fault) */
bit crashed[NP];
byte crashes;
bit dclosed[ND * NP];        /* D node d has seen the connection of P node n close */

/* faults and ghosts (only read by assertions, or to bound the faults) */
byte faults;
bit doom[NR];                /* some node decided the request fails (reject, abort, failure) */
bit tainted[NR];             /* a fault or timeout touched the request */
byte inflight[NPAGE];        /* posted writes that target each page and have not landed */

/* Scratch for the loops inside one d_step. Every d_step that uses them ends with CLR, so they
 * are always 0 in a stored state and add nothing to the state space. (Not `hidden`: pan's
 * breadth-first and multi-core modes refuse hidden variables.) */
byte hi, hj, hp, he, hok;
#define CLR hi = 0; hj = 0; hp = 0; he = 0; hok = 0

#define MAY_FAULT (faults < MAXF)

/* Witnesses: spec:check compiles with -DWITNESS=k and expects pan to reach point k, so the
 * scenarios the properties are about do happen in the model (it is not safe by being idle). */
#ifdef WITNESS
#define SEEN(k, cond) if :: (WITNESS == k) && (cond) -> assert(false) :: else -> skip fi
#else
#define SEEN(k, cond) skip
#endif

/* ---------------------------------------------------------------- the trace (spin -T only;
 * the verifier does not print). One line per protocol event, in numeric codes; the
 * conformance adapter turns each line into a TraceEvent of src/transfer/trace.ts. Within
 * one step the model prints: recv | drop, page actions, state, send, outcome. */
#define EV_SEND(role, node, r, m, prole, pnode) printf("EV send %d %d %d %d %d %d\n", role, node, r, m, prole, pnode)
#define EV_RECV(role, node, r, m, prole, pnode) printf("EV recv %d %d %d %d %d %d\n", role, node, r, m, prole, pnode)
#define EV_DROP(role, node, r, m, why) printf("EV drop %d %d %d %d %d\n", role, node, r, m, why)
#define EV_STATE(role, node, r, from, to) printf("EV state %d %d %d %d %d\n", role, node, r, from, to)
#define EV_PAGE(role, node, r, act, page, epoch) printf("EV page %d %d %d %d %d %d\n", role, node, r, act, page, epoch)
#define EV_CLOSE(role, node, prole, pnode) printf("EV close %d %d %d %d\n", role, node, prole, pnode)
#define EV_OUTCOME(r, o) printf("EV outcome %d %d\n", r, o)

/* ---------------------------------------------------------------- messages */
#define BUMP(x) assert(x < WIRE_MAX); x = x + 1
#define R_SEND_D(r, f, m) BUMP(w[r].f); EV_SEND(ROLE_router, 0, r, m, ROLE_decode, DN(r))
#define R_SEND_P(r, f, m) if :: !crashed[PN(r)] -> BUMP(w[r].f) :: else -> skip fi; EV_SEND(ROLE_router, 0, r, m, ROLE_prefill, PN(r))
#define D_SEND_R(r, f, m) BUMP(w[r].f); EV_SEND(ROLE_decode, DN(r), r, m, ROLE_router, 0)
#define D_SEND_P(r, f, m) if :: !crashed[PN(r)] -> BUMP(w[r].f) :: else -> skip fi; EV_SEND(ROLE_decode, DN(r), r, m, ROLE_prefill, PN(r))
#define P_SEND_R(r, f, m) BUMP(w[r].f); EV_SEND(ROLE_prefill, PN(r), r, m, ROLE_router, 0)
#define P_SEND_D(r, f, m) BUMP(w[r].f); EV_SEND(ROLE_prefill, PN(r), r, m, ROLE_decode, DN(r))
#define R_RECV(r, f, m, prole, pnode) w[r].f = w[r].f - 1; EV_RECV(ROLE_router, 0, r, m, prole, pnode)
#define D_RECV(r, f, m, prole, pnode) w[r].f = w[r].f - 1; EV_RECV(ROLE_decode, DN(r), r, m, prole, pnode)
#define P_RECV(r, f, m, prole, pnode) w[r].f = w[r].f - 1; EV_RECV(ROLE_prefill, PN(r), r, m, prole, pnode)

/* ---------------------------------------------------------------- state changes */
inline r_goto(r, s) { EV_STATE(ROLE_router, 0, r, rst[r], s); assert(R_EDGE(rst[r], s)); rst[r] = s }
inline d_goto(r, s) { EV_STATE(ROLE_decode, DN(r), r, dst[r], s); assert(D_EDGE(dst[r], s)); dst[r] = s }
inline p_goto(r, s) { EV_STATE(ROLE_prefill, PN(r), r, pst[r], s); assert(P_EDGE(pst[r], s)); pst[r] = s }

/* The router tells the client, once. (b): never success after a failure decision; an
 * untouched request that does not fit is told "rejected" (the incident's client got 200). */
inline r_decide(r, o) {
  EV_OUTCOME(r, o);
  SEEN(1, o == OUT_success);
  SEEN(8, o == OUT_success && tainted[r]);
  assert(outcome[r] == OUT_none);
  assert(o != OUT_success || !doom[r]);
  assert(o != OUT_rejected || TOO_LONG(r));
  assert(!TOO_LONG(r) || tainted[r] || o == OUT_rejected);
  outcome[r] = o
}

/* ---------------------------------------------------------------- pages, roles, network */
#include "model/pages.pml"
#include "model/prefill.pml"
#include "model/router.pml"
#include "model/decode.pml"
#include "model/network.pml"

/* ---------------------------------------------------------------- the end */
#define R_DONE(r) (rst[r] == R_Succeeded || rst[r] == R_Failed)
#define D_DONE(r) (dst[r] == D_Idle || dst[r] == D_Finished || dst[r] == D_Released)
#define P_DONE(r) (pst[r] == P_Idle || pst[r] == P_Released || pst[r] == P_Aborted || crashed[PN(r)])
#define REQ_DONE(r) (R_DONE(r) && D_DONE(r) && P_DONE(r) && wr[r] == 0)
#define TIMEOUT_PENDING(r) (R_ACTIVE(r) || rst[r] == R_Cancelling || D_WAITING_KV(r) || \
                            dst[r] == D_Aborting || (P_UP(r) && pst[r] == P_AwaitingAck))
#if ND > 1
#define DPOOLS_FREE (dfree[0] == DPAGES && dfree[1] == DPAGES)
#else
#define DPOOLS_FREE (dfree[0] == DPAGES)
#endif
#define PPOOLS_FREE ((crashed[0] || pfree[0] == PPAGES) && (crashed[1] || pfree[1] == PPAGES))
#if NR > 3
#define ALL_REQ_DONE (REQ_DONE(0) && REQ_DONE(1) && REQ_DONE(2) && REQ_DONE(3))
#define ANY_TIMEOUT_PENDING (TIMEOUT_PENDING(0) || TIMEOUT_PENDING(1) || TIMEOUT_PENDING(2) || TIMEOUT_PENDING(3))
#else
#define ALL_REQ_DONE (REQ_DONE(0) && REQ_DONE(1) && REQ_DONE(2))
#define ANY_TIMEOUT_PENDING (TIMEOUT_PENDING(0) || TIMEOUT_PENDING(1) || TIMEOUT_PENDING(2))
#endif
#define ALL_DONE (ALL_REQ_DONE && DPOOLS_FREE && PPOOLS_FREE)

/* (e) when nothing can happen any more, not even a timeout, everything has ended */
proctype monitor() {
  timeout && !ANY_TIMEOUT_PENDING -> assert(ALL_DONE)
}

#ifndef NO_LTL
ltl done { <> [] ALL_DONE }
#endif

init {
  atomic {
    byte r;
    rlen[0] = LEN0; rlen[1] = LEN1;
    if                                   /* too long for prefill, for decode, for the context */
    :: rlen[2] = PPAGES + 1
    :: rlen[2] = DPAGES + 1
    :: rlen[2] = CTX + 1
    fi;
#if NR > 3
    rlen[3] = LEN3;
#endif
    dfree[0] = DPAGES;
#if ND > 1
    dfree[1] = DPAGES;
#endif
    pfree[0] = PPAGES; pfree[1] = PPAGES;
    for (r : 0 .. NR - 1) {
      r_start(r);
      run router(r); run decode(r); run prefill(r); run network(r)
    }
    run crash(); run monitor();
    r = 0
  }
}
