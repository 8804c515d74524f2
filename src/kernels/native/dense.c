// Tessera's native dense kernels: y[m, rows] = x[m, cols] . W^T for GGML block weights (q4_0,
// q8_0, q4_K, q5_K, q6_K) and float weights (f32, f16, bf16) at small m, on x86-64 with AVX-512
// (F, BW, VL, VNNI) and F16C (dense-avx512.c), or AVX2 with FMA and F16C (dense-avx2.c), the
// variant chosen at load by CPUID (or forced: setVariant). A Node-API addon, built by
// scripts/build-native.mjs; the TypeScript side is native.ts. This file (repacking, helper
// threads, the glue) is compiled for baseline x86-64 and never runs a variant the CPU lacks. It never allocates from JS, never keeps a pointer into a JS
// buffer past a call and never touches anything but the arrays it is given (and its per-thread
// activation scratch).
//
// Block weights are repacked once, at prepare (repack()), into one layout per 256 weights (a
// "super-block"): a header with the block's scale data, then the codes, then the high bits of
// 5/6-bit codes as bit masks. The codes of a super-block are four vectors V0..V3 of 64, in an
// order chosen so that 32-bit lane k of every V_j holds codes of the 16-group k (elements
// 16k .. 16k + 15): V_j[4k + b] = code[16k + 4j + b]. Four vpdpbusd into one accumulator then
// leave each 16-group's whole integer sum in its own lane, scaled by one FMA per super-block
// (AVX2: each V_j as two halves of 8 lanes, vpmaddubsw + vpmaddwd in place of vpdpbusd).
// Activations are quantized into the same order.
//
//   codes  4-bit: 128 bytes, V0 | V1 << 4 in the first 64, V2 | V3 << 4 in the next 64;
//          8-bit (q8_0): V0, V1, V2, V3, 256 bytes
//   q4_0   header: 8 x f16 d (one per 32)                     w = d * (code - 8)
//   q8_0   header: 8 x f16 d; codes uint8 = int8 q + 128       w = d * (code - 128)
//   q4_K   header: f16 d, f16 dmin, u8 sc[8], u8 m[8]          w = d*sc[j] * code - dmin*m[j]
//   q5_K   as q4_K, then 4 x u64 masks: bit i of mask j = bit 4 of V_j[i]
//   q6_K   header: f16 d, i8 sc[16]; 8 x u64 masks: bit 4 of V0..V3, then bit 5 of V0..V3
//                                                             w = d*sc[j/16] * (code - 32)
// Rows are padded with zero codes and zero scales to whole super-blocks.
//
// Activations are quantized per call exactly as llama.cpp's CPU backend quantizes them for the
// weight's kind (quantizeNatural): Q8_0 for q4_0/q8_0 (per 32, the scale rounded to f16), Q8_K
// for K-quants (per 256); per 16 values c = d * sum(q). f16/bf16 weights: x rounded to the
// weight's type first (roundActivations), as llama.cpp's F16/BF16 vec_dot_type. Then for every block
//   sum_k w_k x_k ~= S * dx * sum_k code_k q_k - T * c       (S: the code's scale, T: its offset)
// with the integer sums from vpdpbusd (u8 codes x s8 q, exact in int32). Float sums: f32, a
// fixed order per row, so a row's result does not depend on m or on the other rows.
// Float weights: f32 FMA (f16 and bf16 widened as they are loaded), over rows repacked into
// panels of 32, column-major inside (floatPanel): each row's sum is one FMA chain over its
// columns in order, whatever m.
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dense.h"

// ---------------------------------------------------------------- repacking (plain C)
// Puts the 256 codes of one super-block (natural order, values < 64) into the layout above.
static void putCodes(const uint8_t codes[256], int bits, uint8_t* dst) {
  uint8_t v[4][64];
  for (int j = 0; j < 4; j++)
    for (int k = 0; k < 16; k++)
      for (int b = 0; b < 4; b++) v[j][4 * k + b] = codes[16 * k + 4 * j + b];
  if (bits == 8) {
    for (int j = 0; j < 4; j++) memcpy(dst + 64 * j, v[j], 64);
    return;
  }
  for (int i = 0; i < 64; i++) {
    dst[i] = (v[0][i] & 15) | ((v[1][i] & 15) << 4);
    dst[64 + i] = (v[2][i] & 15) | ((v[3][i] & 15) << 4);
  }
  if (bits <= 4) return;
  uint8_t* masks = dst + 128;
  for (int bit = 4; bit < bits; bit++)
    for (int j = 0; j < 4; j++) {
      uint64_t mask = 0;
      for (int i = 0; i < 64; i++)
        if ((v[j][i] >> bit) & 1) mask |= (uint64_t)1 << i;
      memcpy(masks + 8 * (4 * (bit - 4) + j), &mask, 8);
    }
}

static void scaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One row: src in GGML's layout, dst in ours; cols a multiple of 32 (of 256 for K-quants).
static void repackRow(int kind, const uint8_t* src, int cols, uint8_t* dst) {
  int nsb = (cols + QK - 1) / QK, sb_bytes = superBytes(kind);
  uint8_t codes[256];
  memset(dst, 0, (size_t)nsb * sb_bytes);
  for (int s = 0; s < nsb; s++) {
    uint8_t* out = dst + (size_t)s * sb_bytes;
    memset(codes, 0, sizeof codes);
    if (kind == K_Q4_0 || kind == K_Q8_0) {
      int blockBytes = kind == K_Q4_0 ? 18 : 34;
      int first = s * 8, nb = cols / 32 - first < 8 ? cols / 32 - first : 8;
      for (int b = 0; b < nb; b++) {
        const uint8_t* blk = src + (size_t)(first + b) * blockBytes;
        memcpy(out + 2 * b, blk, 2);
        for (int j = 0; j < 32; j++) {
          if (kind == K_Q4_0) codes[32 * b + j] = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
          else codes[32 * b + j] = (uint8_t)(blk[2 + j] ^ 0x80);
        }
      }
      putCodes(codes, kind == K_Q4_0 ? 4 : 8, out + 16);
    } else if (kind == K_Q4_K || kind == K_Q5_K) {
      const uint8_t* blk = src + (size_t)s * (kind == K_Q4_K ? 144 : 176);
      memcpy(out, blk, 4);  // d, dmin
      for (int j = 0; j < 8; j++) scaleMinK4(j, blk + 4, out + 4 + j, out + 12 + j);
      const uint8_t* qh = blk + 16;
      const uint8_t* qs = blk + (kind == K_Q4_K ? 16 : 48);
      for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
          uint8_t lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
          if (kind == K_Q5_K) {
            lo |= ((qh[l] >> (2 * c)) & 1) << 4;
            hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
          }
          codes[64 * c + l] = lo;
          codes[64 * c + 32 + l] = hi;
        }
      putCodes(codes, kind == K_Q4_K ? 4 : 5, out + 20);
    } else {  // K_Q6_K
      const uint8_t* blk = src + (size_t)s * 210;
      memcpy(out, blk + 208, 2);
      memcpy(out + 2, blk + 192, 16);
      for (int n = 0; n < 2; n++) {
        const uint8_t* ql = blk + 64 * n;
        const uint8_t* qh = blk + 128 + 32 * n;
        for (int l = 0; l < 32; l++) {
          codes[128 * n + l] = (ql[l] & 15) | (((qh[l] >> 0) & 3) << 4);
          codes[128 * n + 32 + l] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
          codes[128 * n + 64 + l] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
          codes[128 * n + 96 + l] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
      }
      putCodes(codes, 6, out + 18);
    }
  }
}

// Float weights into panels of PR rows, column-major inside (floatPanel), zero padded.
static void repackFloat(int kind, const uint8_t* src, int rows, int cols, uint8_t* dst) {
  size_t elem = floatElem(kind);
  memset(dst, 0, weightBytes(kind, rows, cols));
  for (int r = 0; r < rows; r++) {
    uint8_t* panel = dst + (size_t)(r / PR) * PR * cols * elem;
    const uint8_t* row = src + (size_t)r * cols * elem;
    for (int k = 0; k < cols; k++) memcpy(panel + ((size_t)k * PR + r % PR) * elem, row + (size_t)k * elem, elem);
  }
}

// ---------------------------------------------------------------- activations
// Per-thread scratch for quantized (block kinds) or rounded (f16 / bf16) activations, grown as needed.
static _Thread_local int8_t* sq;
static _Thread_local float *sdx, *sc16, *sxh;
static _Thread_local size_t scap, sxhcap;
static const DenseVariant* active;

static int ensureScratch(size_t kpad, int m) {
  size_t need = kpad * (size_t)m;
  if (need <= scap) return 1;
  free(sq);
  free(sdx);
  free(sc16);
  sq = aligned_alloc(64, need);
  sdx = aligned_alloc(64, need / 16 * 4);
  sc16 = aligned_alloc(64, need / 16 * 4);
  if (!sq || !sdx || !sc16) {
    scap = 0;
    return 0;
  }
  scap = need;
  return 1;
}

// One call's x rows to quantize (block kinds) or round (f16 / bf16) into the caller's scratch:
// items are x rows, each whole on one thread (the caller's or a helper's), the same bits either way.
typedef struct {
  Job* job;
  int8_t* q;
  float *dx, *c, *xh;
} Prep;

static int prepareRows(void* ctx, int i0, int i1) {
  const Prep* p = (const Prep*)ctx;
  const Job* j = p->job;
  if (p->xh != NULL) {
    active->roundRow(j->kind, j->x + (size_t)i0 * j->cols, (size_t)(i1 - i0) * j->cols, p->xh + (size_t)i0 * j->cols);
    return 1;
  }
  for (int i = i0; i < i1; i++)
    active->quantizeRow(j->kind, j->x + (size_t)i * j->cols, j->cols, j->kpad, p->q + (size_t)i * j->kpad,
                        p->dx + (size_t)i * (j->kpad / 16), p->c + (size_t)i * (j->kpad / 16));
  return 1;
}

// x rows from which sharing their preparation with the helpers pays for the hand-off.
#define PREPARE_SHARE_MIN_ROWS 16

int tesseraShare(ShareFn fn, void* ctx, int count, int per, int useHelpers);

// Quantizes x for a block kind (f16 / bf16: rounds it, so the products match llama.cpp's) into
// this thread's scratch, with the variant in use, its rows shared with the helpers when asked and
// there are enough of them; 0 when the scratch cannot be had.
static int prepareJob(Job* j, int useHelpers) {
  Prep p = {.job = j};
  if (j->kind == K_F16 || j->kind == K_BF16) {
    size_t n = (size_t)j->m * j->cols;
    if (n > sxhcap) {
      free(sxh);
      sxh = aligned_alloc(64, (n + 15) / 16 * 64);
      sxhcap = sxh ? n : 0;
      if (!sxh) return 0;
    }
    p.xh = sxh;
  } else if (isBlockKind(j->kind)) {
    j->nsb = (j->cols + QK - 1) / QK;
    j->kpad = j->nsb * QK;
    if (!ensureScratch((size_t)j->kpad, j->m)) return 0;
    p.q = sq;
    p.dx = sdx;
    p.c = sc16;
  } else {
    return 1;
  }
  const int share = useHelpers && j->m >= PREPARE_SHARE_MIN_ROWS;
  tesseraShare(prepareRows, &p, j->m, share ? (j->m + 7) / 8 : j->m, share);
  if (p.xh != NULL) {
    j->x = sxh;
  } else {
    j->q = sq;
    j->dx16 = sdx;
    j->c16 = sc16;
  }
  return 1;
}

// ---------------------------------------------------------------- helper threads
// A call may share its work with up to MAX_HELPERS persistent helper threads (setThreads):
// tesseraShare runs a function over items [0, count) (a matmul's weight rows; attention.c's
// (token, KV head) pairs) in chunks of `per` items. The chunks are cut into one contiguous range
// per thread (the caller's first), each a 64-bit word seq (24 bits) | lo (20) | hi (20): a thread
// takes its own range's chunks in order from the front, so it streams one run of the weight with
// no jump, and then what is left of the others' from their backs, each by CAS on the whole word;
// a helper that read a word of an ended job fails its CAS (seq differs) and can only ever take a
// chunk of the job now posted, whose `shared*` fields were written before its ranges. (One shared
// ticket handing out chunks in turn made both threads jump at every chunk: 2% slower over a 1B
// step's batch-1 matmuls, w8-layer.) A thread counts its chunks into `finished` once, when it has
// no more to take. The caller computes
// chunks too and returns only after every chunk is done (`finished`), so it never waits on a
// helper that is asleep: it does the work itself. Helpers spin for spinMicros after a job (the
// next matmul of a decode step comes within microseconds), yielding the core to any runnable
// thread as they do, then sleep on a futex. One caller at
// a time uses the helpers (a mutex, tried, never waited on); another runs alone. The set is one
// per process, sized by the largest setThreads asked (native.ts); each call says whether it
// wants them.
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define MAX_HELPERS 7
// A chunk is ~1/8 of one thread's share of the weight, between 32 KiB and 256 KiB: long runs keep
// the hardware prefetchers streaming (a thread jumps to a new place at every chunk). Measured on
// q4_K 65536 x 2048 from DRAM, two threads: 32 KiB chunks 19-24 GB/s, 256 KiB 33-35 GB/s; a
// software prefetch 4 or 16 super-blocks ahead only slowed it down (it was removed).
#define CHUNK_MIN_BYTES (32 * 1024)
#define CHUNK_MAX_BYTES (256 * 1024)
// The job now posted: fn over items [0, count), per items a chunk (written before its ranges).
static ShareFn sharedFn;
static void* sharedCtx;
static int sharedCount, sharedPer;
static atomic_int failedChunks;
// Thread k's chunks still to take, [lo, hi), as seq (24 bits) | lo (20) | hi (20); one cache line each.
static struct {
  _Alignas(64) _Atomic uint64_t word;
} ranges[MAX_HELPERS + 1];
static atomic_int finished;
static atomic_uint posted;  // futex word: bumped with every job
static atomic_int sleepers;
static atomic_int helpersWanted, helpersRunning;
static atomic_long spinNanos = 100000;
static pthread_mutex_t callerLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t configLock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t jobSeq;

static long nowNanos(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

// Rows per chunk (see CHUNK_MAX_BYTES), for `threads` threads; whole panels for float weights.
static int chunkRows(const Job* j, int threads) {
  size_t rowBytes = weightBytes(j->kind, PR, j->cols) / PR;
  size_t bytes = rowBytes * j->rows / (8 * (size_t)threads);
  bytes = bytes < CHUNK_MIN_BYTES ? CHUNK_MIN_BYTES : bytes > CHUNK_MAX_BYTES ? CHUNK_MAX_BYTES : bytes;
  size_t r = bytes / rowBytes;
  if (!isBlockKind(j->kind)) return r < PR ? PR : (int)(r / PR * PR);
  return r < 4 ? 4 : (int)r;
}

// Chunks the helper threads (not callers) have computed since load: the tests' proof that a
// shared call was shared.
static atomic_long helperChunks;

// Takes one chunk of range k, from its front (its owner) or its back (another thread); 0 when empty.
static int takeChunk(int k, int front, uint32_t* chunk) {
  for (;;) {
    uint64_t t = atomic_load_explicit(&ranges[k].word, memory_order_acquire);
    uint32_t lo = (uint32_t)(t >> 20) & 0xFFFFF, hi = (uint32_t)t & 0xFFFFF;
    if (lo >= hi) return 0;
    uint64_t next = front ? t + ((uint64_t)1 << 20) : t - 1;
    if (atomic_compare_exchange_weak_explicit(&ranges[k].word, &t, next, memory_order_acq_rel, memory_order_acquire)) {
      *chunk = front ? lo : hi - 1;
      return 1;
    }
  }
}

// Thread `id` (0: the caller, 1 + i: helper i) computes its own range's chunks in order, then
// takes what is left of the others' from their ends. It counts its chunks in `finished` once, at
// the end: one shared cache line written per thread and job, not per chunk.
static void work(int id) {
  uint32_t chunk;
  int done = 0, failed = 0;
  for (int k = 0; k <= MAX_HELPERS; k++) {
    int r = (id + k) % (MAX_HELPERS + 1);
    while (takeChunk(r, k == 0, &chunk)) {
      int per = sharedPer, i0 = (int)chunk * per, i1 = i0 + per > sharedCount ? sharedCount : i0 + per;
      failed |= !sharedFn(sharedCtx, i0, i1);
      done++;
    }
  }
  if (done == 0) return;
  if (failed) atomic_store_explicit(&failedChunks, 1, memory_order_relaxed);
  if (id > 0) atomic_fetch_add_explicit(&helperChunks, done, memory_order_relaxed);
  atomic_fetch_add_explicit(&finished, done, memory_order_release);
}

static void* helperMain(void* arg) {
  int index = (int)(intptr_t)arg;
  unsigned seen = atomic_load(&posted);
  for (;;) {
    if (index >= atomic_load(&helpersWanted)) break;
    long until = nowNanos() + atomic_load(&spinNanos);
    unsigned now;
    int spins = 0;
    while ((now = atomic_load_explicit(&posted, memory_order_acquire)) == seen) {
      __builtin_ia32_pause();
      // Every 64 pauses: give the core to any other runnable thread (on a busy 2-core machine the
      // event loop's), and sleep once the spin time is up.
      if (++spins % 64 == 0) sched_yield();
      if (spins % 64 == 0 && nowNanos() > until) {
        atomic_fetch_add(&sleepers, 1);
        if (atomic_load(&posted) == seen) syscall(SYS_futex, &posted, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        atomic_fetch_sub(&sleepers, 1);
        until = nowNanos() + atomic_load(&spinNanos);
        if (index >= atomic_load(&helpersWanted)) goto out;
      }
    }
    seen = now;
    work(1 + index);
  }
out:
  atomic_fetch_sub(&helpersRunning, 1);
  return NULL;
}

static void wakeAll(void) {
  atomic_fetch_add(&posted, 1);
  syscall(SYS_futex, &posted, FUTEX_WAKE_PRIVATE, MAX_HELPERS, NULL, NULL, 0);
}

// Helper threads: threads - 1 of them, spinning spinMicros after each job. 0 on failure.
static int setThreads(int threads, long spinMicros) {
  pthread_mutex_lock(&configLock);
  pthread_mutex_lock(&callerLock);
  atomic_store(&spinNanos, spinMicros * 1000);
  int want = threads - 1 < 0 ? 0 : threads - 1 > MAX_HELPERS ? MAX_HELPERS : threads - 1;
  // Stop every helper, then start `want` new ones (simple, and rare: once per engine).
  atomic_store(&helpersWanted, 0);
  while (atomic_load(&helpersRunning) > 0) {
    wakeAll();
    usleep(100);
  }
  int ok = 1;
  atomic_store(&helpersWanted, want);
  for (int i = 0; i < want; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&helpersRunning, 1);
    if (pthread_create(&t, &attr, helperMain, (void*)(intptr_t)i) != 0) {
      atomic_fetch_sub(&helpersRunning, 1);
      atomic_store(&helpersWanted, i);
      ok = 0;
      pthread_attr_destroy(&attr);
      break;
    }
    pthread_attr_destroy(&attr);
  }
  pthread_mutex_unlock(&callerLock);
  pthread_mutex_unlock(&configLock);
  return ok;
}

int tesseraShare(ShareFn fn, void* ctx, int count, int per, int useHelpers) {
  int chunks = (count + per - 1) / per;
  if (!useHelpers || chunks < 2 || chunks > 0xFFFFF || atomic_load(&helpersWanted) == 0 || pthread_mutex_trylock(&callerLock) != 0) {
    int ok = 1;
    for (int i0 = 0; i0 < count; i0 += per) ok &= fn(ctx, i0, i0 + per > count ? count : i0 + per);
    return ok;
  }
  sharedFn = fn;
  sharedCtx = ctx;
  sharedCount = count;
  sharedPer = per;
  uint32_t seq = ++jobSeq & 0xFFFFFF;
  atomic_store_explicit(&finished, 0, memory_order_relaxed);
  atomic_store_explicit(&failedChunks, 0, memory_order_relaxed);
  // Thread k's range: the k-th of `parts` equal runs of chunks (empty for the threads not started).
  int parts = 1 + atomic_load(&helpersWanted);
  for (int k = 0; k <= MAX_HELPERS; k++) {
    uint64_t lo = k < parts ? (uint64_t)chunks * k / parts : 0, hi = k < parts ? (uint64_t)chunks * (k + 1) / parts : 0;
    atomic_store_explicit(&ranges[k].word, ((uint64_t)seq << 40) | (lo << 20) | hi, memory_order_release);
  }
  atomic_fetch_add_explicit(&posted, 1, memory_order_release);
  if (atomic_load(&sleepers) > 0) syscall(SYS_futex, &posted, FUTEX_WAKE_PRIVATE, MAX_HELPERS, NULL, NULL, 0);
  work(0);
  // Every 64 pauses, the core goes to any other runnable thread: on a loaded machine the helper
  // still computing a chunk may be waiting for this very core.
  for (int spins = 1; atomic_load_explicit(&finished, memory_order_acquire) < chunks; spins++) {
    __builtin_ia32_pause();
    if (spins % 64 == 0) sched_yield();
  }
  int ok = !atomic_load_explicit(&failedChunks, memory_order_acquire);
  pthread_mutex_unlock(&callerLock);
  return ok;
}

int tesseraThreads(void) { return 1 + atomic_load(&helpersWanted); }

// One chunk of a matmul: weight rows [r0, r1) for every x row.
static int denseChunk(void* ctx, int r0, int r1) {
  active->computeRows((const Job*)ctx, r0, r1);
  return 1;
}

static int runJob(Job* j, int useHelpers) {
  if (!prepareJob(j, useHelpers)) return 0;
  // Alone, chunk by chunk as the helpers would: every block of x rows (MB_MAX, or FB for float
  // weights) goes over one chunk while it is in L2. Over the whole weight at once, each block streamed it from DRAM
  // again (one thread, 32000 x 768: f16 m=8 14 -> 9.5 ms, f32 m=16 45-48 -> 19-21).
  j->per = chunkRows(j, tesseraThreads());
  return tesseraShare(denseChunk, j, j->rows, j->per, useHelpers);
}

// ---------------------------------------------------------------- Node-API glue
#define CHECK(call)                                                    \
  do {                                                                 \
    if ((call) != napi_ok) {                                           \
      napi_throw_error(env, NULL, "tessera-native: " #call " failed"); \
      return NULL;                                                     \
    }                                                                  \
  } while (0)

// ---------------------------------------------------------------- variants
static int hasAvx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
}

static int hasAvx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

// The variant in use (`active`): the best this CPU has, unless setVariant chose another it has.
// NULL: none.
static int activeChosen;

static const DenseVariant* bestVariant(void) { return hasAvx512() ? &denseAvx512 : hasAvx2() ? &denseAvx2 : NULL; }

static const DenseVariant* variant(void) {
  if (!activeChosen) {
    active = bestVariant();
    activeChosen = 1;
  }
  return active;
}

int tesseraVariant(void) { return variant() == NULL ? -1 : variant() == &denseAvx2 ? 1 : 0; }

static napi_value jsSupported(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CHECK(napi_get_boolean(env, variant() != NULL, &v));
  return v;
}

// variant(): the variant's name ('avx512' or 'avx2'), or null when the CPU has neither.
static napi_value jsVariant(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  if (variant() == NULL) CHECK(napi_get_null(env, &v));
  else CHECK(napi_create_string_utf8(env, variant()->name, NAPI_AUTO_LENGTH, &v));
  return v;
}

// setVariant(name): 'auto' (the best this CPU has), 'avx512' or 'avx2'; false (and nothing
// changed) when this CPU lacks the variant's instructions. Called before any matmul (native.ts).
static napi_value jsSetVariant(napi_env env, napi_callback_info info) {
  size_t argc = 1, len;
  napi_value argv[1], result;
  char name[16];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 1 || napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "setVariant(name): bad arguments");
    return NULL;
  }
  const DenseVariant* want = strcmp(name, "auto") == 0     ? bestVariant()
                             : strcmp(name, "avx512") == 0 ? (hasAvx512() ? &denseAvx512 : NULL)
                             : strcmp(name, "avx2") == 0   ? (hasAvx2() ? &denseAvx2 : NULL)
                                                           : NULL;
  if (want != NULL) {
    pthread_mutex_lock(&callerLock);  // never while a call shares its rows with the helpers
    active = want;
    activeChosen = 1;
    pthread_mutex_unlock(&callerLock);
  }
  CHECK(napi_get_boolean(env, want != NULL, &result));
  return result;
}

static int argInt(napi_env env, napi_value v, int* out) { return napi_get_value_int32(env, v, out) == napi_ok; }

static int typedBytes(napi_env env, napi_value v, void** data, size_t* bytes) {
  napi_typedarray_type type;
  size_t length, offset;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, data, &ab, &offset) != napi_ok) return 0;
  size_t elem = type == napi_float32_array ? 4 : type == napi_uint16_array ? 2 : type == napi_uint8_array ? 1 : 0;
  if (elem == 0) return 0;
  *bytes = length * elem;
  return 1;
}

// repackedBytes(kind, rows, cols): bytes of the repacked weight.
static napi_value jsRepackedBytes(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], result;
  int kind, rows, cols;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 3 || !argInt(env, argv[0], &kind) || !argInt(env, argv[1], &rows) || !argInt(env, argv[2], &cols) ||
      kind < 0 || kind > K_Q6_K || rows < 0 || cols <= 0) {
    napi_throw_type_error(env, NULL, "repackedBytes(kind, rows, cols): bad arguments");
    return NULL;
  }
  double bytes = (double)weightBytes(kind, rows, cols);
  CHECK(napi_create_double(env, bytes, &result));
  return result;
}

// repack(kind, src: Uint8Array, rows, cols, dst: Uint8Array)
static napi_value jsRepack(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  int kind, rows, cols;
  void *src, *dst;
  size_t srcBytes, dstBytes;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 5 || !argInt(env, argv[0], &kind) || !argInt(env, argv[2], &rows) || !argInt(env, argv[3], &cols) ||
      !typedBytes(env, argv[1], &src, &srcBytes) || !typedBytes(env, argv[4], &dst, &dstBytes) ||
      kind < 0 || kind > K_Q6_K || rows < 0 || cols <= 0) {
    napi_throw_type_error(env, NULL, "repack(kind, src, rows, cols, dst): bad arguments");
    return NULL;
  }
  if (!isBlockKind(kind)) {
    if (srcBytes != (size_t)rows * cols * floatElem(kind) || dstBytes != weightBytes(kind, rows, cols)) {
      napi_throw_range_error(env, NULL, "repack: src or dst has the wrong byte size");
      return NULL;
    }
    repackFloat(kind, (const uint8_t*)src, rows, cols, (uint8_t*)dst);
    return NULL;
  }
  int kquant = kind >= K_Q4_K;
  if (cols % (kquant ? QK : 32) != 0) {
    napi_throw_range_error(env, NULL, "repack: cols is not a multiple of the block size");
    return NULL;
  }
  size_t srcRow = kquant ? (size_t)(cols / QK) * (kind == K_Q4_K ? 144 : kind == K_Q5_K ? 176 : 210)
                         : (size_t)(cols / 32) * (kind == K_Q4_0 ? 18 : 34);
  size_t dstRow = weightBytes(kind, 1, cols);
  if (srcBytes != srcRow * rows || dstBytes != dstRow * rows) {
    napi_throw_range_error(env, NULL, "repack: src or dst has the wrong byte size");
    return NULL;
  }
  for (int r = 0; r < rows; r++) repackRow(kind, (const uint8_t*)src + srcRow * r, cols, (uint8_t*)dst + dstRow * r);
  return NULL;
}

// matmul(kind, w, rows, cols, x: Float32Array, m, y: Float32Array, helpers: 0 | 1):
// y[m, rows] = x[m, cols] . W^T, with the helper threads when helpers is 1.
static napi_value jsMatmul(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  int kind, rows, cols, m, helpers;
  void *w, *x, *y;
  size_t wBytes, xBytes, yBytes;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 8 || !argInt(env, argv[7], &helpers) || !argInt(env, argv[0], &kind) || !argInt(env, argv[2], &rows) || !argInt(env, argv[3], &cols) ||
      !argInt(env, argv[5], &m) || !typedBytes(env, argv[1], &w, &wBytes) || !typedBytes(env, argv[4], &x, &xBytes) ||
      !typedBytes(env, argv[6], &y, &yBytes) || kind < 0 || kind > K_Q6_K || rows < 0 || cols <= 0 || m < 0) {
    napi_throw_type_error(env, NULL, "matmul(kind, w, rows, cols, x, m, y, helpers): bad arguments");
    return NULL;
  }
  size_t need = weightBytes(kind, rows, cols);
  if (wBytes != need || xBytes < (size_t)m * cols * 4 || yBytes < (size_t)m * rows * 4) {
    napi_throw_range_error(env, NULL, "matmul: w, x or y has the wrong byte size");
    return NULL;
  }
  Job job = {.kind = kind, .rows = rows, .cols = cols, .m = m, .w = (const uint8_t*)w, .x = (const float*)x,
             .y = (float*)y};
  if (variant() == NULL) {
    napi_throw_error(env, NULL, "matmul: this CPU has neither AVX-512 VNNI nor AVX2 + FMA + F16C");
    return NULL;
  }
  if (m > 0 && rows > 0 && !runJob(&job, helpers)) {
    napi_throw_error(env, NULL, "matmul: out of memory for the activation scratch");
    return NULL;
  }
  return NULL;
}

// setThreads(threads, spinMicros): threads - 1 helper threads, for calls that ask for them.
static napi_value jsSetThreads(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  int threads, spin;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 2 || !argInt(env, argv[0], &threads) || !argInt(env, argv[1], &spin) || threads < 1 || spin < 0) {
    napi_throw_type_error(env, NULL, "setThreads(threads >= 1, spinMicros >= 0): bad arguments");
    return NULL;
  }
  CHECK(napi_get_boolean(env, setThreads(threads, spin), &result));
  return result;
}

// helperChunks(): chunks of shared calls the helper threads have computed since load.
static napi_value jsHelperChunks(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CHECK(napi_create_double(env, (double)atomic_load(&helperChunks), &v));
  return v;
}

// alloc(bytes): a zeroed Uint8Array of memory the addon owns, 2 MiB aligned and advised to be
// backed by transparent huge pages: a decode step streams every weight once, and with 4 KiB
// pages it pays a TLB miss (and a hardware-prefetch stop) every 4 KiB. Freed when collected.
static void freeHuge(napi_env env, void* data, void* hint) {
  size_t usable = (size_t)(uintptr_t)hint;
  int64_t total;
  napi_adjust_external_memory(env, -(int64_t)usable, &total);
  munmap(data, usable);
}

static napi_value jsAlloc(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], ab, out;
  double bytesD;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 1 || napi_get_value_double(env, argv[0], &bytesD) != napi_ok || !(bytesD >= 0) || bytesD > 1e12) {
    napi_throw_type_error(env, NULL, "alloc(bytes): bad arguments");
    return NULL;
  }
  size_t bytes = (size_t)bytesD, huge = (size_t)2 << 20;
  size_t mapped = (bytes + huge - 1) / huge * huge + huge;  // room to align to 2 MiB
  if (bytes == 0) mapped = huge;
  uint8_t* raw = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    napi_throw_error(env, NULL, "alloc: out of memory");
    return NULL;
  }
  uint8_t* aligned = (uint8_t*)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
  size_t head = (size_t)(aligned - raw), usable = mapped - head;
  if (head > 0) munmap(raw, head);  // keep [aligned, aligned + usable)
  madvise(aligned, usable, MADV_HUGEPAGE);
  if (napi_create_external_arraybuffer(env, aligned, bytes, freeHuge, (void*)(uintptr_t)usable, &ab) != napi_ok) {
    munmap(aligned, usable);
    napi_throw_error(env, NULL, "alloc: cannot wrap the memory in an ArrayBuffer");
    return NULL;
  }
  CHECK(napi_create_typedarray(env, napi_uint8_array, bytes, ab, 0, &out));
  int64_t total;
  CHECK(napi_adjust_external_memory(env, (int64_t)usable, &total));
  return out;
}

// attention.c's paged attention; argmax.c's argmax.
napi_value tesseraAttention(napi_env env, napi_callback_info info);
// attention-layer.c's one-call layer attention of a step (RoPE, KV write, every sequence's items).
napi_value tesseraAttendLayer(napi_env env, napi_callback_info info);
napi_value tesseraArgmax(napi_env env, napi_callback_info info);
// rowops.c's RMSNorm, SiLU·mul and add.
napi_value tesseraRowOp(napi_env env, napi_callback_info info);
// lora.c's low-rank LoRA term over a group of rows.
napi_value tesseraLoraRows(napi_env env, napi_callback_info info);
// mapfile.c's read-only file mapping.
napi_value tesseraMapFile(napi_env env, napi_callback_info info);
napi_value tesseraReleaseFilePages(napi_env env, napi_callback_info info);
// experts.c's routed experts over GGML blocks in place.
napi_value tesseraExperts(napi_env env, napi_callback_info info);

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"supported", NULL, jsSupported, NULL, NULL, NULL, napi_default, NULL},
      {"variant", NULL, jsVariant, NULL, NULL, NULL, napi_default, NULL},
      {"setVariant", NULL, jsSetVariant, NULL, NULL, NULL, napi_default, NULL},
      {"repackedBytes", NULL, jsRepackedBytes, NULL, NULL, NULL, napi_default, NULL},
      {"repack", NULL, jsRepack, NULL, NULL, NULL, napi_default, NULL},
      {"matmul", NULL, jsMatmul, NULL, NULL, NULL, napi_default, NULL},
      {"setThreads", NULL, jsSetThreads, NULL, NULL, NULL, napi_default, NULL},
      {"helperChunks", NULL, jsHelperChunks, NULL, NULL, NULL, napi_default, NULL},
      {"alloc", NULL, jsAlloc, NULL, NULL, NULL, napi_default, NULL},
      {"attention", NULL, tesseraAttention, NULL, NULL, NULL, napi_default, NULL},
      {"attendLayer", NULL, tesseraAttendLayer, NULL, NULL, NULL, napi_default, NULL},
      {"argmax", NULL, tesseraArgmax, NULL, NULL, NULL, napi_default, NULL},
      {"rowOp", NULL, tesseraRowOp, NULL, NULL, NULL, napi_default, NULL},
      {"loraRows", NULL, tesseraLoraRows, NULL, NULL, NULL, napi_default, NULL},
      {"mapFile", NULL, tesseraMapFile, NULL, NULL, NULL, napi_default, NULL},
      {"releaseFilePages", NULL, tesseraReleaseFilePages, NULL, NULL, NULL, napi_default, NULL},
      {"experts", NULL, tesseraExperts, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE_INIT() { return init(env, exports); }
