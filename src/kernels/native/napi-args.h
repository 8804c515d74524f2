// The addon's Node-API argument readers, one copy for every file with a JavaScript entry point
// (attention.c, attention-layer.c, experts.c): a typed array of exactly one element type, and an
// int32. Each returns 1 when the argument is what was asked for, 0 otherwise (the caller throws).
#ifndef TESSERA_NAPI_ARGS_H
#define TESSERA_NAPI_ARGS_H
#include <node_api.h>
#include <stddef.h>

static inline int napiTyped(napi_env env, napi_value v, napi_typedarray_type want, void** data, size_t* length) {
  napi_typedarray_type type;
  napi_value ab;
  size_t offset;
  return napi_get_typedarray_info(env, v, &type, length, data, &ab, &offset) == napi_ok && type == want;
}

static inline int napiInt32(napi_env env, napi_value v, int* out) { return napi_get_value_int32(env, v, out) == napi_ok; }

#endif
