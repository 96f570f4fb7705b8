"""Parquet files written by pyarrow, each with pyarrow's own reading of it.

Usage: pyarrow_parquet.py OUT_DIR

For every encoding docs/datasets.md claims, crossed with every codec and both
data page versions, writes OUT_DIR/NAME.parquet and OUT_DIR/NAME.jsonl (one
line per row: pq.read_table(...).to_pylist()); OUT_DIR/cases.jsonl lists
them. Rows are written as `datasets` shows them: floats as
{"$float": float.hex(x)} so they are compared bit for bit (NaN, -0.0 and
infinities included, which JSON cannot hold), bytes decoded as Python's
errors="replace" decodes them, maps of text keys as objects
(maps_as_pydicts).

Small row groups, small pages and a small dictionary page limit make every
file hold several row groups, several pages per column chunk, and (for the
dictionary cases) a dictionary that overflows into PLAIN pages part way.

Each file's metadata is checked to hold the encoding it was written to test,
so a pyarrow that quietly wrote PLAIN instead fails here, not passes there.

Claimed in docs/datasets.md but not written here, because pyarrow cannot
write it: INTERVAL columns (no Arrow type maps to it; DuckDB writes them in
tests/datasets/parquet_duckdb_test.cpp), LZO compression (refused like LZ4
and Brotli, which are written below), two-level lists (pyarrow writes only the
three-level form) and the deprecated BIT_PACKED level encoding.
"""
import decimal
import json
import math
import sys
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 300
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
WORDS = ["", "a", "What is 7 + 8?", "résumé", "数学题", "emoji 🙂 end", "\\boxed{15}", "line\nbreak",
         "<tool_call>\n{\"name\": \"calculator\"}\n</tool_call>", "x" * 300]
FLOATS = [0.0, -0.0, 1.5, -2.25, 0.1, 1e-300, 5e-324, 1.7976931348623157e308, math.inf, -math.inf, math.nan]
# float32's largest, smallest subnormal and a value it rounds.
FLOATS32 = [0.0, -0.0, 1.5, -2.25, 0.1, 3.4028234663852886e38, 1.401298464324817e-45, math.inf, -math.inf,
            math.nan, 16777217.0]


def text(i):
    # Shared prefixes and repeats, as DELTA_BYTE_ARRAY and dictionaries meet in datasets.
    return None if i % 11 == 5 else WORDS[i % len(WORDS)] + (str(i) if i % 3 else "")


def message_list(i):
    if i % 13 == 4:
        return None
    return [{"role": ["system", "user", "assistant", None][(i + k) % 4],
             "content": text(i + k)} for k in range(i % 4)]


def table():
    i = range(ROWS)
    return pa.table({
        "problem": pa.array([text(k) for k in i], pa.string()),
        "raw": pa.array([None if k % 7 == 0 else bytes([0x82, 0xFF, k % 256]) + b"ab" for k in i], pa.binary()),
        "i32": pa.array([None if k % 17 == 3 else (k * 7919) % 200003 - 100000 for k in i], pa.int32()),
        "i64": pa.array([None if k % 19 == 2 else (k - 150) * 123456789012 for k in i], pa.int64()),
        # Deltas between these wrap around, as a writer computes them in the column's width.
        "i32_extremes": pa.array([[-2**31, 2**31 - 1, 0, -1, 5][k % 5] for k in i], pa.int32()),
        "i64_extremes": pa.array([[-2**63, 2**63 - 1, 0, -1][k % 4] for k in i], pa.int64()),
        "f32": pa.array(np.array([FLOATS32[k % len(FLOATS32)] for k in i], dtype=np.float32)),
        "f64": pa.array([None if k % 23 == 1 else FLOATS[k % len(FLOATS)] * (1 + k / 7) for k in i], pa.float64()),
        "half": pa.array(np.array([FLOATS[k % 6] + k / 4 for k in i], dtype=np.float16)),
        # Multiples of 1/4: exact in binary, so the reader's division must give pyarrow's value bit for bit.
        "price": pa.array([None if k % 12 == 7 else decimal.Decimal(k * 25 - 3000) / 100 for k in i],
                          pa.decimal128(9, 2)),
        # Past 18 digits of precision (16 bytes), within the 2^53 a double holds exactly: past it the
        # reader's double can be one unit in the last place from float(Decimal), as it rounds the
        # integer, then the division by the scale (1 row in 300 at 2^60).
        "big": pa.array([decimal.Decimal((k - 150) * 10**12) / 2 for k in i], pa.decimal128(30, 1)),
        "id": pa.array([None if k % 10 == 3 else bytes((k * 37 + j) % 256 for j in range(16)) for k in i], pa.uuid()),
        "flag": pa.array([None if k % 5 == 4 else k % 3 == 0 for k in i], pa.bool_()),
        "messages": pa.array([message_list(k) for k in i], pa.list_(MESSAGE)),
        "tags": pa.array([None if k % 9 == 0 else [text(k + j) for j in range(k % 3)] for k in i],
                         pa.list_(pa.string())),
        "meta": pa.array([None if k % 8 == 0 else {"source": text(k), "level": k % 5} for k in i],
                         pa.struct([("source", pa.string()), ("level", pa.int32())])),
        "attrs": pa.array([None if k % 6 == 1 else [("k" + str(j), text(k + j)) for j in range(k % 3)] for k in i],
                          pa.map_(pa.string(), pa.string())),
    })


# The leaves each encoding applies to (pyarrow's writer refuses the others).
def leaves_for(encoding, schema):
    def kind(t):
        if pa.types.is_boolean(t): return "bool"
        if pa.types.is_integer(t): return "int"
        if pa.types.is_float16(t) or pa.types.is_decimal(t) or isinstance(t, pa.UuidType):
            return "fixed"  # FIXED_LEN_BYTE_ARRAY
        if pa.types.is_floating(t): return "float"
        return "bytes"
    accepts = {"PLAIN": {"bool", "int", "fixed", "float", "bytes"}, "DELTA_BINARY_PACKED": {"int"},
               "DELTA_LENGTH_BYTE_ARRAY": {"bytes"}, "DELTA_BYTE_ARRAY": {"bytes", "fixed"},
               "BYTE_STREAM_SPLIT": {"float", "int", "fixed"}, "RLE": {"bool"}}[encoding]
    out = {}
    def walk(path, t):
        if pa.types.is_struct(t):
            for f in t: walk(path + [f.name], f.type)
        elif pa.types.is_map(t):
            walk(path + ["key_value", "key"], t.key_type)
            walk(path + ["key_value", "value"], t.item_type)
        elif pa.types.is_list(t):
            walk(path + ["list", "element"], t.value_type)
        elif kind(t) in accepts:
            out[".".join(path)] = encoding
    for f in schema: walk([f.name], f.type)
    return out


# name -> (write_table arguments, the encoding each file must hold)
ENCODINGS = {
    "plain": ({"use_dictionary": False}, "PLAIN"),
    "dictionary": ({"use_dictionary": True}, "RLE_DICTIONARY"),
    # Format version 1.0 makes pyarrow write the older PLAIN_DICTIONARY.
    "plain_dictionary": ({"use_dictionary": True, "version": "1.0"}, "PLAIN_DICTIONARY"),
    "delta_binary_packed": ({"use_dictionary": False}, "DELTA_BINARY_PACKED"),
    "delta_length_byte_array": ({"use_dictionary": False}, "DELTA_LENGTH_BYTE_ARRAY"),
    "delta_byte_array": ({"use_dictionary": False}, "DELTA_BYTE_ARRAY"),
    "byte_stream_split": ({"use_dictionary": False}, "BYTE_STREAM_SPLIT"),
    "rle_boolean": ({"use_dictionary": False}, "RLE"),
}
CODECS = ["none", "snappy", "gzip", "zstd"]
# Codecs docs/datasets.md says are refused with an error naming the column.
REFUSED_CODECS = ["lz4", "brotli"]


def as_dataset_value(v):
    if isinstance(v, float):
        return {"$float": v.hex()}
    if isinstance(v, decimal.Decimal):
        return {"$float": float(v).hex()}  # decimals are read as numbers
    if isinstance(v, uuid.UUID):
        return str(v)  # the canonical text, as docs/datasets.md says UUIDs are read
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, dict):
        return {k: as_dataset_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_dataset_value(x) for x in v]
    return v


def write_case(out_dir, name, t, kwargs, must_hold):
    path = f"{out_dir}/{name}.parquet"
    pq.write_table(t, path, row_group_size=128, data_page_size=512, write_batch_size=32,
                   dictionary_pagesize_limit=256, **kwargs)
    md = pq.ParquetFile(path).metadata
    # The leaves asked for the encoding hold it (levels are RLE too, so each leaf is looked at), or some leaf does.
    asked = kwargs.get("column_encoding") or {}
    held = {}
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(g).column(c)
            held.setdefault(col.path_in_schema, set()).update(col.encodings)
    missing = [p for p in asked if must_hold not in held[p]]
    if missing or not any(must_hold in e for e in held.values()):
        sys.exit(f"{name}: pyarrow did not write {must_hold} for {missing or 'any column'}: {held}")
    with open(f"{out_dir}/{name}.jsonl", "w", encoding="utf-8") as f:
        for row in pq.read_table(path).to_pylist(maps_as_pydicts="strict"):
            f.write(json.dumps(as_dataset_value(row), ensure_ascii=False) + "\n")
    return {"file": f"{name}.parquet", "rows": f"{name}.jsonl", "row_groups": md.num_row_groups}


def main(out_dir):
    t = table()
    cases = []
    for enc_name, (base, must_hold) in ENCODINGS.items():
        kwargs = dict(base)
        # PLAIN is asked for by name too: v2 pages otherwise hold booleans as RLE.
        if must_hold not in ("RLE_DICTIONARY", "PLAIN_DICTIONARY"):
            kwargs["column_encoding"] = leaves_for(must_hold, t.schema)
        for codec in CODECS:
            for page in ["1.0", "2.0"]:
                name = f"{enc_name}_{codec}_v{page[0]}"
                case = write_case(out_dir, name, t, {**kwargs, "compression": codec, "data_page_version": page},
                                  must_hold)
                cases.append({**case, "encoding": must_hold, "codec": codec, "page": page})
    for codec in REFUSED_CODECS:
        name = f"refused_{codec}"
        pq.write_table(t, f"{out_dir}/{name}.parquet", compression=codec)
        cases.append({"file": f"{name}.parquet", "codec": codec, "refused": True})
    with open(f"{out_dir}/cases.jsonl", "w") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")
    print(f"{len(cases)} files")


main(sys.argv[1])
