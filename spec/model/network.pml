/* The network of tessera.pml: one-sided writes landing, loss and duplication of
 * messages (one process per request), a prefill crash and the close that decode sees. */

/* ---------------------------------------------------------------- the network */
/* A posted write lands in D's page with its stamp, unchecked by D's CPU (one-sided). */
inline land(r, i) {
  hp = tpage[TAB(r, i)]; he = tepoch[TAB(r, i)];
  EV_RECV(ROLE_decode, DN(r), r, M_KvChunk, ROLE_prefill, PN(r));
  EV_PAGE(ROLE_decode, DN(r), r, A_write, hp - DN(r) * DPAGES, he);
  EV_PAGE(ROLE_decode, DN(r), r, A_stamp, hp - DN(r) * DPAGES, he);
  assert(lstate[hp] != PG_free && lepoch[hp] == he);   /* (c) */
  SEEN(3, lstate[hp] == PG_quarantined);
  SEEN(4, crashed[PN(r)]);
  stamp[hp] = he;
  wr[r] = wr[r] & (~(1 << i)); inflight[hp]--;
  if
  :: dst[r] == D_AwaitingKv -> d_goto(r, D_Receiving)
  :: else -> skip
  fi
}

#define LOSE(r, f) :: d_step { MAY_FAULT && w[r].f > 0 -> faults++; tainted[r] = 1; w[r].f = w[r].f - 1 }
#define DUP(r, f) :: d_step { MAY_FAULT && w[r].f > 0 && w[r].f < WIRE_MAX -> faults++; tainted[r] = 1; w[r].f = w[r].f + 1 }

proctype network(byte r) {
end:
  do
  :: d_step { wr[r] & 1 -> land(r, 0); CLR }
  :: d_step { wr[r] & 2 -> land(r, 1); CLR }
  :: d_step { wr[r] & 4 -> land(r, 2); CLR }
#if MAXLEN > 3
  :: d_step { wr[r] & 8 -> land(r, 3); CLR }
#endif
  LOSE(r, Reserve) LOSE(r, Reserved) LOSE(r, RejectedDR) LOSE(r, RejectedPR) LOSE(r, Prefill)
  LOSE(r, KvDone) LOSE(r, Ack) LOSE(r, Tokens) LOSE(r, Finished) LOSE(r, FailedDR)
  LOSE(r, FailedPR) LOSE(r, AbortRD) LOSE(r, AbortRP) LOSE(r, AbortDP) LOSE(r, AbortAckPD) LOSE(r, AbortAckDR)
  DUP(r, Reserve) DUP(r, Reserved) DUP(r, RejectedDR) DUP(r, RejectedPR) DUP(r, Prefill)
  DUP(r, KvDone) DUP(r, Ack) DUP(r, Tokens) DUP(r, Finished) DUP(r, FailedDR)
  DUP(r, FailedPR) DUP(r, AbortRD) DUP(r, AbortRP) DUP(r, AbortDP) DUP(r, AbortAckPD) DUP(r, AbortAckDR)
  od;
  skip
}

/* ---------------------------------------------------------------- crash and close */
/* A prefill node stops for good. Messages to it vanish; its posted writes may still land
 * until a decode node sees the connection close and tears its end down. */
inline p_crash(n) {
  crashed[n] = 1; crashes++; faults++;
  hj = 0;
  do
  :: hj == NR -> break
  :: else ->
     if
     :: PN(hj) == n -> tainted[hj] = 1; w[hj].Prefill = 0; w[hj].Ack = 0; w[hj].AbortDP = 0; w[hj].AbortRP = 0
     :: else -> skip
     fi;
     hj++
  od;
  skip
}

/* Decode node d sees prefill node n's connection close: nothing from n lands any more, so
 * pages n may have written are released; requests still waiting for n's KV fail. */
inline d_close(d, n) {
  EV_CLOSE(ROLE_decode, d, ROLE_prefill, n);
  dclosed[d * NP + n] = 1;
  hj = 0;
  do
  :: hj == NR -> break
  :: else ->
     if
     :: PN(hj) == n && DN(hj) == d ->
        hi = 0;                                  /* tear down: the in-flight writes are gone */
        do
        :: hi == MAXLEN -> break
        :: else ->
           if
           :: wr[hj] & (1 << hi) -> inflight[tpage[TAB(hj, hi)]]--
           :: else -> skip
           fi;
           hi++
        od;
        wr[hj] = 0; w[hj].KvDone = 0; w[hj].AbortAckPD = 0;
        if
        :: D_WAITING_KV(hj) -> doom[hj] = 1; d_free(hj); d_goto(hj, D_Released); D_SEND_R(hj, FailedDR, M_Failed)
        :: dst[hj] == D_Aborting -> SEEN(5, 1); d_release(hj); d_goto(hj, D_Released)
        :: else -> skip
        fi
     :: else -> skip
     fi;
     hj++
  od;
  skip
}

proctype crash() {
end:
  do
  :: d_step { MAY_FAULT && crashes == 0 -> p_crash(0); CLR }
  :: d_step { MAY_FAULT && crashes == 0 -> p_crash(1); CLR }
  :: d_step { crashed[0] && !dclosed[0 * NP + 0] -> d_close(0, 0); CLR }
  :: d_step { crashed[1] && !dclosed[0 * NP + 1] -> d_close(0, 1); CLR }
#if ND > 1
  :: d_step { crashed[0] && !dclosed[1 * NP + 0] -> d_close(1, 0); CLR }
  :: d_step { crashed[1] && !dclosed[1 * NP + 1] -> d_close(1, 1); CLR }
#endif
  od;
  skip
}
