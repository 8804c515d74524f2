/* The prefill node's side of tessera.pml: its helpers, then one process per request. */

/* ---------------------------------------------------------------- helpers */
#ifdef PLACEHOLDER
#define PLEN(r) (rlen[r] > PPAGES -> 1 : rlen[r])  /* MUTANT: a one-token placeholder */
#else
#define PLEN(r) (rlen[r])
#endif
#ifdef ACK_BEFORE_LANDED
#define WRITES_LANDED(r) (1)                      /* MUTANT: posted counts as landed */
#else
#define WRITES_LANDED(r) (wr[r] == 0)
#endif

inline p_free(r) {                     /* P's source pages; a posted write reads them */
  assert(wr[r] == 0);                  /* (c) */
  pfree[PN(r)] = pfree[PN(r)] + PLEN(r)
}

inline p_abort_ack(r) {
#ifndef DROP_ABORT_ACK
  P_SEND_D(r, AbortAckPD, M_AbortAck)
#else
  skip                                 /* MUTANT: the ack is never sent */
#endif
}

/* P stops writing r (told by D, or its own failure): AbortAck once its writes have landed */
inline p_stop(r) {
  if
  :: pst[r] == P_Computing && !WRITES_LANDED(r) -> p_goto(r, P_Aborting)
  :: pst[r] == P_Computing || pst[r] == P_AwaitingAck -> p_free(r); p_goto(r, P_Aborted); p_abort_ack(r)
  :: else -> skip
  fi
}

/* ---------------------------------------------------------------- the process */
#define P_UP(r) (!crashed[PN(r)])

proctype prefill(byte r) {
end:
  do
  /* Prefill: admission with this node's pool, then allocation of source pages */
  :: d_step { P_UP(r) && w[r].Prefill > 0 && (pst[r] != P_Idle || rlen[r] > PPAGES || pfree[PN(r)] >= PLEN(r)) ->
       P_RECV(r, Prefill, M_Prefill, ROLE_router, 0);
       if
#ifndef PLACEHOLDER
       :: pst[r] == P_Idle && rlen[r] > PPAGES ->     /* rejected before any page or byte */
          SEEN(9, dst[r] == D_AwaitingKv);
          doom[r] = 1; p_goto(r, P_Aborted); P_SEND_R(r, RejectedPR, M_Rejected); p_abort_ack(r)
#endif
       :: pst[r] == P_Idle ->
          assert(rlen[r] <= PPAGES);                  /* (d) */
          pfree[PN(r)] = pfree[PN(r)] - PLEN(r); p_goto(r, P_Computing)
       :: else -> EV_DROP(ROLE_prefill, PN(r), r, M_Prefill, WHY_state)
       fi }
  /* post the write of the next page: it lands later, in any order */
  :: d_step { P_UP(r) && pst[r] == P_Computing && posted[r] < PLEN(r) && !shortw[r] ->
       assert(!TOO_LONG(r));                         /* (d) no byte moves for a misfit */
       hp = tpage[TAB(r, posted[r])];
       wr[r] = wr[r] | (1 << posted[r]); inflight[hp]++;
       EV_SEND(ROLE_prefill, PN(r), r, M_KvChunk, ROLE_decode, DN(r));
       posted[r]++; CLR }
  /* every write posted (or so it claims) and landed: KvDone */
  :: d_step { P_UP(r) && pst[r] == P_Computing && (posted[r] == PLEN(r) || shortw[r]) && WRITES_LANDED(r) ->
       p_goto(r, P_AwaitingAck); P_SEND_D(r, KvDone, M_KvDone) }
  :: d_step { P_UP(r) && w[r].Ack > 0 -> P_RECV(r, Ack, M_Ack, ROLE_decode, DN(r));
       if
       :: pst[r] == P_AwaitingAck -> p_free(r); p_goto(r, P_Released)
       :: else -> EV_DROP(ROLE_prefill, PN(r), r, M_Ack, WHY_state)
       fi }
  :: d_step { P_UP(r) && w[r].AbortDP > 0 -> P_RECV(r, AbortDP, M_Abort, ROLE_decode, DN(r));
       if
#ifndef NO_TOMBSTONE
       :: pst[r] == P_Idle -> p_goto(r, P_Aborted); p_abort_ack(r)   /* a late Prefill is refused */
#else
       :: pst[r] == P_Idle -> p_abort_ack(r)                        /* MUTANT: forgets the abort */
#endif
       :: pst[r] == P_Computing || pst[r] == P_AwaitingAck -> p_stop(r)
       :: pst[r] == P_Aborted || pst[r] == P_Released -> p_abort_ack(r)
       :: else -> skip                                              /* Aborting: acks when drained */
       fi }
  /* Abort from the router: stop, and tell decode (the router drops an AbortAck sent to it) */
  :: d_step { P_UP(r) && w[r].AbortRP > 0 -> P_RECV(r, AbortRP, M_Abort, ROLE_router, 0);
       if
#ifndef NO_TOMBSTONE
       :: pst[r] == P_Idle -> p_goto(r, P_Aborted)
#endif
       :: pst[r] == P_Computing || pst[r] == P_AwaitingAck -> p_stop(r)
       :: else -> skip
       fi }
  :: d_step { P_UP(r) && pst[r] == P_Aborting && WRITES_LANDED(r) -> SEEN(7, 1); p_free(r); p_goto(r, P_Aborted); p_abort_ack(r) }
  /* prefill fails the request at any point while computing */
  :: d_step { P_UP(r) && MAY_FAULT && pst[r] == P_Computing ->
       faults++; tainted[r] = 1; doom[r] = 1; p_stop(r); P_SEND_R(r, FailedPR, M_Failed) }
  /* placeholder-done (a fault): write the first page only, then claim the whole prompt */
  :: d_step { P_UP(r) && MAY_FAULT && pst[r] == P_Computing && posted[r] == 1 && PLEN(r) > 1 && !shortw[r] ->
       faults++; tainted[r] = 1; shortw[r] = 1 }
  /* no Ack (lost, or prefill stops waiting at any point): the writes have landed, so the
   * source pages can go */
  :: d_step { P_UP(r) && MAY_FAULT && pst[r] == P_AwaitingAck -> faults++; tainted[r] = 1; p_free(r); p_goto(r, P_Released) }
  :: d_step { timeout && P_UP(r) && pst[r] == P_AwaitingAck -> p_free(r); p_goto(r, P_Released) }
  od;
  skip
}
