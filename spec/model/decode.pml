/* The decode node's side of tessera.pml: one process per request. */

#define D_WAITING_KV(r) (dst[r] == D_AwaitingKv || dst[r] == D_Receiving)

proctype decode(byte r) {
end:
  do
  /* Reserve: admission with this node's pool, then allocation (waits while pages are busy) */
  :: d_step { w[r].Reserve > 0 && (dst[r] != D_Idle || rlen[r] > DPAGES || dfree[DN(r)] >= rlen[r]) ->
       D_RECV(r, Reserve, M_Reserve, ROLE_router, 0);
       if
       :: dst[r] == D_Idle && rlen[r] > DPAGES ->
          doom[r] = 1; d_goto(r, D_Released); D_SEND_R(r, RejectedDR, M_Rejected)
       :: dst[r] == D_Idle -> d_allocate(r); d_goto(r, D_AwaitingKv); D_SEND_R(r, Reserved, M_Reserved)
       :: else -> EV_DROP(ROLE_decode, DN(r), r, M_Reserve, WHY_state)
       fi; CLR }
  /* KvDone: decode trusts its own stamps, never the sender's claim */
  :: d_step { w[r].KvDone > 0 -> D_RECV(r, KvDone, M_KvDone, ROLE_prefill, PN(r));
       if
       :: D_WAITING_KV(r) ->
          d_page_check(r);
          if
          :: hok -> d_goto(r, D_Decoding); D_SEND_P(r, Ack, M_Ack)
          :: else -> SEEN(6, 1); d_abort(r); D_SEND_R(r, FailedDR, M_Failed)      /* fail closed */
          fi
       :: else -> EV_DROP(ROLE_decode, DN(r), r, M_KvDone, WHY_state)
       fi; CLR }
  /* a decode step: the page check, then (later) the read */
  :: d_step { dst[r] == D_Decoding && !dchecked[r] ->
       d_page_check(r);
       if
       :: hok -> dchecked[r] = 1
       :: else -> doom[r] = 1; d_free(r); d_goto(r, D_Released); D_SEND_R(r, FailedDR, M_Failed)
       fi; CLR }
  :: d_step { dst[r] == D_Decoding && dchecked[r] ->
       d_read(r); dchecked[r] = 0; d_free(r); d_goto(r, D_Finished);
       D_SEND_R(r, Tokens, M_Tokens); D_SEND_R(r, Finished, M_Finished); CLR }
  /* Abort from the router */
  :: d_step { w[r].AbortRD > 0 -> D_RECV(r, AbortRD, M_Abort, ROLE_router, 0);
       if
       :: dst[r] == D_Idle -> d_goto(r, D_Released)               /* a tombstone */
       :: D_WAITING_KV(r) -> d_abort(r)
       :: dst[r] == D_Decoding -> dchecked[r] = 0; d_free(r); d_goto(r, D_Released)
       :: else -> skip
       fi;
       D_SEND_R(r, AbortAckDR, M_AbortAck); CLR }
  /* AbortAck from the writer: it will never write r's pages again, and its writes landed */
  :: d_step { w[r].AbortAckPD > 0 -> D_RECV(r, AbortAckPD, M_AbortAck, ROLE_prefill, PN(r));
       if
       :: dst[r] == D_Aborting -> d_release(r); d_goto(r, D_Released)
       :: D_WAITING_KV(r) -> d_free(r); d_goto(r, D_Released)     /* the writer gave up */
       :: else -> EV_DROP(ROLE_decode, DN(r), r, M_AbortAck, WHY_state)
       fi; CLR }
  /* decode fails the request at any point (out of memory, a bad page, shutdown) */
  :: d_step { MAY_FAULT && D_WAITING_KV(r) -> faults++; tainted[r] = 1; d_abort(r); D_SEND_R(r, FailedDR, M_Failed); CLR }
  :: d_step { MAY_FAULT && dst[r] == D_Decoding ->
       faults++; tainted[r] = 1; doom[r] = 1; dchecked[r] = 0; d_free(r); d_goto(r, D_Released);
       D_SEND_R(r, FailedDR, M_Failed); CLR }
  /* timeouts: waiting for KV; waiting for the writer's AbortAck (ask again) */
  :: d_step { timeout && D_WAITING_KV(r) -> tainted[r] = 1; d_abort(r); D_SEND_R(r, FailedDR, M_Failed); CLR }
  :: d_step { timeout && dst[r] == D_Aborting -> D_SEND_P(r, AbortDP, M_Abort) }
  od;
  skip
}
