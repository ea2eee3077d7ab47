"""The native Avro decoder's adapter: packs a compiled resolution into ``AvroProgram``
(checked by the C side when made) and wraps the column buffers ``avro_decode`` fills as
one Arrow array, without a copy (``pa.py_buffer`` over memory the C side allocated)."""
from __future__ import annotations

from array import array

import pyarrow as pa

from .._native import AvroProgram, avro_decode
from . import _avro_resolve as R


def pack(prog: R.Program) -> "AvroProgram":
    ops = array("i", [v for op in prog.ops for v in op])
    offsets = array("q", [0])
    for c in prog.consts:
        offsets.append(offsets[-1] + len(c))
    cols = array("i")
    children = array("i")
    for col in prog.columns:
        cols.extend((col.kind, len(col.children), len(children)))
        children.extend(col.children)
    return AvroProgram(ops.tobytes(), array("i", prog.table).tobytes(),
                               b"".join(prog.consts), offsets.tobytes(), cols.tobytes(),
                               children.tobytes(), prog.root)


def _array(prog: R.Program, bufs: list, i: int) -> pa.Array:
    col = prog.columns[i]
    n, nulls, valid, data, var = bufs[i]
    wrap = pa.py_buffer
    validity = wrap(valid) if valid is not None else None
    if col.kind == R.C_NULL:
        return pa.nulls(n)
    if col.kind == R.C_BIN:
        return pa.Array.from_buffers(col.type, n, [validity, wrap(data), wrap(var)], null_count=nulls)
    if col.kind == R.C_STRUCT:
        kids = [_array(prog, bufs, k) for k in col.children]
        return pa.Array.from_buffers(col.type, n, [validity], null_count=nulls, children=kids)
    if col.kind == R.C_LIST:
        kids = [_array(prog, bufs, col.children[0])]
        return pa.Array.from_buffers(col.type, n, [validity, wrap(data)], null_count=nulls,
                                     children=kids)
    if col.kind == R.C_MAP:
        keys, values = (_array(prog, bufs, k) for k in col.children)
        entries = pa.StructArray.from_arrays([keys, values],
                                             fields=[col.type.key_field, col.type.item_field])
        return pa.Array.from_buffers(col.type, n, [validity, wrap(data)], null_count=nulls,
                                     children=[entries])
    return pa.Array.from_buffers(col.type, n, [validity, wrap(data)], null_count=nulls)


def decode(prog: R.Program, native: "AvroProgram", values: pa.Array,
           rows: pa.Array | None, skip: int, permissive: bool
           ) -> tuple[pa.Array, list[tuple[int, int, str]], tuple | None]:
    """-> (array, bad, error), as :func:`._avro_python.decode`."""
    vbufs = values.buffers()
    data = vbufs[2] if vbufs[2] is not None else b""
    if rows is None:
        rbuf, roff, nrows = None, 0, len(values)
    else:
        rbuf, roff, nrows = rows.buffers()[1], rows.offset, len(rows)
    cols, bad, error = avro_decode(native, vbufs[0], vbufs[1], data, values.offset,
                                           len(values), rbuf, roff, nrows, skip, permissive)
    if error is not None:
        return None, [], error
    assert cols is not None and bad is not None
    out = _array(prog, cols, 0)
    out.validate()      # lengths and buffer sizes agree: a program bug fails here, not later
    return out, bad, None
