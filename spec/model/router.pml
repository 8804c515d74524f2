/* The router's side of tessera.pml: one process per request. */

#define R_ACTIVE(r) (rst[r] == R_Reserving || rst[r] == R_Prefilling || rst[r] == R_Streaming)

inline r_abort(r) {                    /* client disconnect, router abort or timeout */
  doom[r] = 1;
  if
  :: rst[r] == R_Prefilling -> r_goto(r, R_Cancelling); R_SEND_D(r, AbortRD, M_Abort); R_SEND_P(r, AbortRP, M_Abort)
  :: else -> r_goto(r, R_Cancelling); R_SEND_D(r, AbortRD, M_Abort)
  fi;
  r_decide(r, OUT_error)
}

/* A client request arrives: the router's own admission, then Reserve. Every request arrives
 * at the start (in init); the network's delays stand for later arrivals. */
inline r_start(r) {
  if
  :: rlen[r] > CTX -> doom[r] = 1; r_goto(r, R_Failed); r_decide(r, OUT_rejected)
  :: else -> r_goto(r, R_Reserving); R_SEND_D(r, Reserve, M_Reserve)
  fi
}

proctype router(byte r) {
end:
  do
  :: d_step { w[r].Reserved > 0 -> R_RECV(r, Reserved, M_Reserved, ROLE_decode, DN(r));
       if
       :: rst[r] == R_Reserving -> r_goto(r, R_Prefilling); R_SEND_P(r, Prefill, M_Prefill)
       :: else -> EV_DROP(ROLE_router, 0, r, M_Reserved, WHY_state)
       fi }
  :: d_step { w[r].RejectedDR > 0 -> R_RECV(r, RejectedDR, M_Rejected, ROLE_decode, DN(r));
       if
       :: rst[r] == R_Reserving -> doom[r] = 1; r_goto(r, R_Failed); r_decide(r, OUT_rejected)
       :: else -> EV_DROP(ROLE_router, 0, r, M_Rejected, WHY_state)
       fi }
  :: d_step { w[r].RejectedPR > 0 -> R_RECV(r, RejectedPR, M_Rejected, ROLE_prefill, PN(r));
       if
       :: rst[r] == R_Prefilling -> doom[r] = 1; r_goto(r, R_Failed); r_decide(r, OUT_rejected)
       :: else -> EV_DROP(ROLE_router, 0, r, M_Rejected, WHY_state)
       fi }
  :: d_step { w[r].Tokens > 0 -> R_RECV(r, Tokens, M_Tokens, ROLE_decode, DN(r));
       if
       :: rst[r] == R_Prefilling -> r_goto(r, R_Streaming)
       :: else -> EV_DROP(ROLE_router, 0, r, M_Tokens, WHY_state)
       fi }
  :: d_step { w[r].Finished > 0 && rst[r] != R_Prefilling ->   /* Finished follows Tokens */
       R_RECV(r, Finished, M_Finished, ROLE_decode, DN(r));
       if
       :: rst[r] == R_Streaming -> r_goto(r, R_Succeeded); r_decide(r, OUT_success)
#ifdef SUCCESS_AFTER_CANCEL
       :: rst[r] == R_Cancelling -> r_goto(r, R_Failed); outcome[r] = OUT_none; r_decide(r, OUT_success)  /* MUTANT */
#endif
       :: else -> SEEN(10, rst[r] == R_Cancelling); EV_DROP(ROLE_router, 0, r, M_Finished, WHY_state)
       fi }
  :: d_step { w[r].FailedDR > 0 -> R_RECV(r, FailedDR, M_Failed, ROLE_decode, DN(r));
       if
       :: rst[r] == R_Prefilling ->                   /* the prefill may still be computing */
          doom[r] = 1; r_goto(r, R_Failed); R_SEND_P(r, AbortRP, M_Abort); r_decide(r, OUT_error)
       :: R_ACTIVE(r) -> doom[r] = 1; r_goto(r, R_Failed); r_decide(r, OUT_error)
       :: else -> EV_DROP(ROLE_router, 0, r, M_Failed, WHY_state)
       fi }
  :: d_step { w[r].FailedPR > 0 -> R_RECV(r, FailedPR, M_Failed, ROLE_prefill, PN(r));
       if
       :: R_ACTIVE(r) -> doom[r] = 1; r_goto(r, R_Failed); r_decide(r, OUT_error)
       :: else -> EV_DROP(ROLE_router, 0, r, M_Failed, WHY_state)
       fi }
  :: d_step { w[r].AbortAckDR > 0 -> R_RECV(r, AbortAckDR, M_AbortAck, ROLE_decode, DN(r));
       if
       :: rst[r] == R_Cancelling -> r_goto(r, R_Failed)
       :: else -> EV_DROP(ROLE_router, 0, r, M_AbortAck, WHY_state)
       fi }
  /* the client disconnects, or the router gives up: a protocol abort, never a cut */
  :: d_step { MAY_FAULT && R_ACTIVE(r) -> faults++; tainted[r] = 1; r_abort(r) }
  /* every wait has a timeout (fires when nothing else can happen) */
  :: d_step { timeout && R_ACTIVE(r) -> tainted[r] = 1; r_abort(r) }
  :: d_step { timeout && rst[r] == R_Cancelling -> r_goto(r, R_Failed) }
  od;
  skip
}
