"""safetensors_io.py: writes and reads the safetensors format by hand (no library):
8-byte little-endian header length N, N bytes of JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
padded with spaces to a multiple of 8, then the raw little-endian tensor bytes, packed
in header order with no gaps. It must never convert dtypes: callers hand it arrays in
the dtype they want stored.
"""
import json
import struct

import numpy as np

DTYPES = {np.dtype("<f2"): "F16", np.dtype("<f4"): "F32"}
NUMPY = {v: k for k, v in DTYPES.items()}


def write(path: str, tensors: dict, metadata: dict) -> None:
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[array.dtype.newbyteorder("<")], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for chunk in chunks:
            f.write(chunk)


def read(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n :]
    out, expected = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        assert begin == expected, f"gap or overlap before {name}"
        expected = end
        out[name] = np.frombuffer(data[begin:end], dtype=NUMPY[info["dtype"]]).reshape(info["shape"])
    assert expected == len(data), "trailing bytes after the last tensor"
    return out
