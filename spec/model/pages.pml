/* Decode's pages in tessera.pml: allocation, free, quarantine and release in the ledger,
 * the page check (tags and stamps) and the read of a decode step, and decode's abort of a
 * transfer. Properties (a), (c) and (d) are asserted here. */

/* (c) nothing may still land in page p of request r: no posted write is in flight, and r's
 * writer can post no more (it has finished or stopped, or its connection is closed) */
#define WRITER_DONE(r) (pst[r] == P_AwaitingAck || pst[r] == P_Released || pst[r] == P_Aborted || \
                        dclosed[DN(r) * NP + PN(r)])
#define NO_WRITE_CAN_LAND(r, p) (inflight[p] == 0 && WRITER_DONE(r))

inline d_allocate(r) {                  /* the lowest free pages of the node, new epochs */
  assert(rlen[r] <= DPAGES);             /* (d) */
  hi = 0; hp = DN(r) * DPAGES;
  do
  :: hi == rlen[r] -> break
  :: else ->
     if
     :: lstate[hp] == PG_free ->
        SEEN(2, stamp[hp] != 0);
        lstate[hp] = PG_allocated; lepoch[hp] = lepoch[hp] + 1; dfree[DN(r)]--;
        tpage[TAB(r, hi)] = hp; tepoch[TAB(r, hi)] = lepoch[hp];
        EV_PAGE(ROLE_decode, DN(r), r, A_allocate, hp - DN(r) * DPAGES, lepoch[hp]);
        hi++
     :: else -> skip
     fi;
     hp++
  od;
  skip
}

/* allocated -> free, for pages still held by r in r's epoch */
inline d_free(r) {
  hi = 0;
  do
  :: hi == rlen[r] -> break
  :: else ->
     hp = tpage[TAB(r, hi)]; he = tepoch[TAB(r, hi)];
     if
     :: lstate[hp] == PG_allocated && lepoch[hp] == he ->
        EV_PAGE(ROLE_decode, DN(r), r, A_free, hp - DN(r) * DPAGES, he);
        assert(NO_WRITE_CAN_LAND(r, hp));  /* (c) */
        lstate[hp] = PG_free; dfree[DN(r)]++
     :: else -> skip
     fi;
     hi++
  od;
  skip
}

inline d_quarantine(r) {
  hi = 0;
  do
  :: hi == rlen[r] -> break
  :: else ->
     hp = tpage[TAB(r, hi)]; he = tepoch[TAB(r, hi)];
     if
     :: lstate[hp] == PG_allocated && lepoch[hp] == he ->
        EV_PAGE(ROLE_decode, DN(r), r, A_quarantine, hp - DN(r) * DPAGES, he);
        lstate[hp] = PG_quarantined
     :: else -> skip
     fi;
     hi++
  od;
  skip
}

inline d_release(r) {                   /* quarantined -> free */
  hi = 0;
  do
  :: hi == rlen[r] -> break
  :: else ->
     hp = tpage[TAB(r, hi)]; he = tepoch[TAB(r, hi)];
     if
     :: lstate[hp] == PG_quarantined && lepoch[hp] == he ->
        EV_PAGE(ROLE_decode, DN(r), r, A_release, hp - DN(r) * DPAGES, he);
        assert(NO_WRITE_CAN_LAND(r, hp));  /* (c) */
        lstate[hp] = PG_free; dfree[DN(r)]++
     :: else -> skip
     fi;
     hi++
  od;
  skip
}

/* The page check: for every page of r, the ledger still holds it in r's epoch (the tag) and
 * the stamp says it was written in that epoch (a page allocated but never written in this
 * epoch carries an older stamp: the incident's stale page). Run when KvDone arrives
 * (coverage) and before every decode step. */
#ifdef NO_EPOCH_CHECK
#define STAMP_OK(s, e) ((s) != 0)              /* MUTANT: "written", but in which epoch? */
#else
#define STAMP_OK(s, e) ((s) == (e))
#endif
inline d_page_check(r) {
  hok = 1;
#ifndef NO_COVERAGE
  hi = 0;
  do
  :: hi == rlen[r] -> break
  :: else ->
     hp = tpage[TAB(r, hi)]; he = tepoch[TAB(r, hi)];
     if
     :: !(lstate[hp] == PG_allocated && lepoch[hp] == he && STAMP_OK(stamp[hp], he)) -> hok = 0
     :: else -> skip
     fi;
     hi++
  od
#endif                                   /* MUTANT NO_COVERAGE: trust KvDone's tokensCovered */
}

/* (a) the read of one decode step: every page written for r in r's current epoch */
inline d_read(r) {
  hi = 0;
  do
  :: hi == rlen[r] -> break
  :: else ->
     hp = tpage[TAB(r, hi)]; he = tepoch[TAB(r, hi)];
     EV_PAGE(ROLE_decode, DN(r), r, A_read, hp - DN(r) * DPAGES, he);
     assert(lstate[hp] == PG_allocated && lepoch[hp] == he && stamp[hp] == he);
     hi++
  od;
  skip
}

/* D gives up on r while a writer may still be writing: quarantine until its AbortAck or
 * the close of its connection, and tell it to stop. */
inline d_abort(r) {
  doom[r] = 1;
#ifdef FREE_BEFORE_ACK
  d_free(r);                             /* MUTANT: free at once */
#else
  d_quarantine(r);
#endif
  if
  :: dclosed[DN(r) * NP + PN(r)] -> d_release(r); d_goto(r, D_Released)
  :: else -> d_goto(r, D_Aborting); D_SEND_P(r, AbortDP, M_Abort)
  fi
}
