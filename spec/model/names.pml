/* Names of tessera.pml: roles, per-request states, ledger page states, page actions,
 * messages, outcomes, and the edge table of each role. The numbering is the one the trace
 * lines (EV ...) use; spec/conformance/tables.ts holds the same names and edges, and
 * test/conformance/tables.test.ts parses this file to keep them equal. */

/* roles */
#define ROLE_router 0
#define ROLE_prefill 1
#define ROLE_decode 2

/* router per-request states */
#define R_Idle 0
#define R_Reserving 1
#define R_Prefilling 2
#define R_Streaming 3
#define R_Cancelling 4
#define R_Succeeded 5
#define R_Failed 6

/* decode per-request states */
#define D_Idle 0
#define D_AwaitingKv 1
#define D_Receiving 2
#define D_Decoding 3
#define D_Aborting 4
#define D_Finished 5
#define D_Released 6

/* prefill per-request states */
#define P_Idle 0
#define P_Computing 1
#define P_AwaitingAck 2
#define P_Aborting 3
#define P_Released 4
#define P_Aborted 5

/* ledger page states (cached: the prefix cache, not modelled) */
#define PG_free 0
#define PG_allocated 1
#define PG_quarantined 2

/* page actions */
#define A_allocate 0
#define A_write 1
#define A_stamp 2
#define A_read 3
#define A_free 4
#define A_quarantine 5
#define A_release 6

/* messages */
#define M_Reserve 0
#define M_Reserved 1
#define M_Rejected 2
#define M_Prefill 3
#define M_KvChunk 4
#define M_KvDone 5
#define M_Ack 6
#define M_Tokens 7
#define M_Finished 8
#define M_Failed 9
#define M_Abort 10
#define M_AbortAck 11

/* what the client is told */
#define OUT_none 0
#define OUT_success 1
#define OUT_rejected 2
#define OUT_error 3

/* why a received message was dropped */
#define WHY_state 0                           /* not expected in the receiver's state */

/* Every state change the model makes is one of these edges (asserted on each change);
 * spec/conformance/tables.ts holds the same table and a test keeps the two equal. */
#define EDGE(a, b, x, y) ((a) == (x) && (b) == (y))
#define R_EDGE(a, b) ( \
  EDGE(a, b, R_Idle, R_Reserving) || \
  EDGE(a, b, R_Idle, R_Failed) || \
  EDGE(a, b, R_Reserving, R_Prefilling) || \
  EDGE(a, b, R_Reserving, R_Failed) || \
  EDGE(a, b, R_Reserving, R_Cancelling) || \
  EDGE(a, b, R_Prefilling, R_Streaming) || \
  EDGE(a, b, R_Prefilling, R_Failed) || \
  EDGE(a, b, R_Prefilling, R_Cancelling) || \
  EDGE(a, b, R_Streaming, R_Succeeded) || \
  EDGE(a, b, R_Streaming, R_Failed) || \
  EDGE(a, b, R_Streaming, R_Cancelling) || \
  EDGE(a, b, R_Cancelling, R_Failed))
#define D_EDGE(a, b) ( \
  EDGE(a, b, D_Idle, D_AwaitingKv) || \
  EDGE(a, b, D_Idle, D_Released) || \
  EDGE(a, b, D_AwaitingKv, D_Receiving) || \
  EDGE(a, b, D_AwaitingKv, D_Aborting) || \
  EDGE(a, b, D_AwaitingKv, D_Released) || \
  EDGE(a, b, D_Receiving, D_Decoding) || \
  EDGE(a, b, D_Receiving, D_Aborting) || \
  EDGE(a, b, D_Receiving, D_Released) || \
  EDGE(a, b, D_Decoding, D_Finished) || \
  EDGE(a, b, D_Decoding, D_Released) || \
  EDGE(a, b, D_Aborting, D_Released))
#define P_EDGE(a, b) ( \
  EDGE(a, b, P_Idle, P_Computing) || \
  EDGE(a, b, P_Idle, P_Aborted) || \
  EDGE(a, b, P_Computing, P_AwaitingAck) || \
  EDGE(a, b, P_Computing, P_Aborting) || \
  EDGE(a, b, P_Computing, P_Aborted) || \
  EDGE(a, b, P_AwaitingAck, P_Released) || \
  EDGE(a, b, P_AwaitingAck, P_Aborted) || \
  EDGE(a, b, P_Aborting, P_Aborted))
