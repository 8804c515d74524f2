// A read-only memory map of a model file as an external ArrayBuffer (native.ts: mapFileReadOnly):
// the weights are used where they lie in the page cache instead of being copied into the
// process. The mapping is PROT_READ: a write through it faults (SIGSEGV) rather than changing
// the file or the weights. The finalizer unmaps when the ArrayBuffer is collected, so a view of
// it must stay referenced while anything reads it (a mapping cannot be transferred between
// threads: each thread maps its own). It never writes through the mapping and never keeps the
// file descriptor past the call.
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Live mappings (this process, every thread): releaseFilePages acts only on one of these, so it
// can never zero anonymous memory (MADV_DONTNEED on an ordinary buffer would).
#define MAX_MAPPINGS 1024
static struct {
  void* base;
  size_t bytes;
} mappings[MAX_MAPPINGS];
static pthread_mutex_t mappingsLock = PTHREAD_MUTEX_INITIALIZER;

static int remember(void* base, size_t bytes) {
  int ok = 0;
  pthread_mutex_lock(&mappingsLock);
  for (int i = 0; i < MAX_MAPPINGS && !ok; i++)
    if (mappings[i].base == NULL) {
      mappings[i].base = base;
      mappings[i].bytes = bytes;
      ok = 1;
    }
  pthread_mutex_unlock(&mappingsLock);
  return ok;
}

static int isMapping(void* base, size_t bytes) {
  int found = 0;
  pthread_mutex_lock(&mappingsLock);
  for (int i = 0; i < MAX_MAPPINGS && !found; i++) found = mappings[i].base == base && mappings[i].bytes == bytes;
  pthread_mutex_unlock(&mappingsLock);
  return found;
}

static void unmapFile(napi_env env, void* data, void* hint) {
  (void)env;
  size_t bytes = (size_t)(uintptr_t)hint;
  pthread_mutex_lock(&mappingsLock);
  for (int i = 0; i < MAX_MAPPINGS; i++)
    if (mappings[i].base == data) mappings[i].base = NULL;
  pthread_mutex_unlock(&mappingsLock);
  munmap(data, bytes);
}

// The caller (native.ts) names the file; the message says what failed and why.
static napi_value fail(napi_env env, const char* what, int err) {
  char message[256];
  snprintf(message, sizeof message, "%s (%s)", what, strerror(err));
  napi_throw_error(env, NULL, message);
  return NULL;
}

// mapFile(path: string, writable: 0 | 1, offset, length): a Uint8Array over bytes
// [offset, offset + length) of the file (offset a multiple of the page size; length at most
// 2^32, Node 20's limit for one ArrayBuffer made here: native.ts maps a larger file in
// overlapping pieces), mapped MAP_PRIVATE and PROT_READ (writable 1, the `writable-weights-map`
// fault point only: PROT_READ | PROT_WRITE, copy-on-write, so a write changes this process's view
// and never the file).
napi_value tesseraMapFile(napi_env env, napi_callback_info info) {
  size_t argc = 4, pathLength = 0;
  napi_value argv[4], ab, out;
  int32_t writable = 0;
  double offsetD = -1, lengthD = -1;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 4 ||
      napi_get_value_string_utf8(env, argv[0], NULL, 0, &pathLength) != napi_ok ||
      napi_get_value_int32(env, argv[1], &writable) != napi_ok || napi_get_value_double(env, argv[2], &offsetD) != napi_ok ||
      napi_get_value_double(env, argv[3], &lengthD) != napi_ok || pathLength == 0 || pathLength > 4096 ||
      !(offsetD >= 0) || !(lengthD >= 0) || lengthD > 4294967296.0 ||
      (uint64_t)offsetD % (uint64_t)sysconf(_SC_PAGESIZE) != 0) {
    napi_throw_type_error(env, NULL, "mapFile(path, writable, offset, length): bad arguments");
    return NULL;
  }
  char path[4097];
  if (napi_get_value_string_utf8(env, argv[0], path, sizeof path, &pathLength) != napi_ok) return NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(env, "cannot open", errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return fail(env, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return fail(env, "cannot map: not a regular file", EINVAL);
  }
  size_t offset = (size_t)offsetD, bytes = (size_t)lengthD;
  if ((uint64_t)st.st_size < (uint64_t)offset + bytes) {
    close(fd);
    return fail(env, "cannot map past the end of the file", EINVAL);
  }
  void* base = NULL;
  if (bytes > 0) {
    base = mmap(NULL, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, (off_t)offset);
    if (base == MAP_FAILED) {
      int err = errno;
      close(fd);
      return fail(env, "cannot map", err);
    }
  }
  close(fd);
  if (bytes == 0) {
    if (napi_create_arraybuffer(env, 0, NULL, &ab) != napi_ok) return NULL;
  } else if (!remember(base, bytes)) {
    munmap(base, bytes);
    napi_throw_error(env, NULL, "mapFile: too many live mappings");
    return NULL;
  } else if (napi_create_external_arraybuffer(env, base, bytes, unmapFile, (void*)(uintptr_t)bytes, &ab) != napi_ok) {
    unmapFile(env, base, (void*)(uintptr_t)bytes);
    napi_throw_error(env, NULL, "mapFile: cannot wrap the mapping in an ArrayBuffer");
    return NULL;
  }
  size_t viewLength = bytes > 0xFFFFFFFFu ? 0xFFFFFFFFu : bytes;
  if (napi_create_typedarray(env, napi_uint8_array, viewLength, ab, 0, &out) != napi_ok) return NULL;
  return out;
}

// releaseFilePages(buffer: ArrayBuffer) -> boolean: drops this process's page-table entries for a mapping
// from mapFile (madvise MADV_DONTNEED over the whole of it) once its bytes were repacked: the pages
// stay in the page cache (reclaimable, shared), the process's RSS no longer counts them, and a later
// read (an embedding row) faults the page back in from the cache. Never changes a byte: a buffer
// that is not a live mapping of mapFile's is left alone (false).
napi_value tesseraReleaseFilePages(napi_env env, napi_callback_info info) {
  size_t argc = 1, bytes = 0;
  napi_value argv[1];
  void* data = NULL;
  bool external = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
      napi_is_arraybuffer(env, argv[0], &external) != napi_ok || !external ||
      napi_get_arraybuffer_info(env, argv[0], &data, &bytes) != napi_ok) {
    napi_throw_type_error(env, NULL, "releaseFilePages(buffer): bad arguments");
    return NULL;
  }
  napi_value result;
  int mapped = bytes > 0 && isMapping(data, bytes);
  if (mapped && madvise(data, bytes, MADV_DONTNEED) != 0) return fail(env, "cannot release the mapping's pages", errno);
  if (napi_get_boolean(env, mapped, &result) != napi_ok) return NULL;
  return result;
}
