/* Batch-level checks in C: the fixed header's magic and length, and the CRC-32C that covers
 * [attributes, end of batch).  The batch walk itself is driven from Python, which must also
 * decide on offset bounds and transactions; doing the per-batch checks here keeps the costly
 * byte work (the CRC) out of the interpreter. */
#include "records.h"
#include "crc32c.h"

uint32_t kt_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

int kt_crc_mismatch(const kt_cursor *c, Py_ssize_t pos, uint32_t stored, uint32_t computed,
                    kt_error *e)
{
    if (stored == computed) return 0;
    return kt_fail(c, pos + KT_CRC_OFFSET, e, "CRC-32C mismatch: stored 0x%08x, computed 0x%08x",
                   stored, computed);
}

/* crc32c(data, start=0, end=len) -> int */
PyObject *kt_py_crc32c(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start = 0, end = -1;
    if (!PyArg_ParseTuple(args, "y*|nn", &view, &start, &end))
        return NULL;
    if (end < 0 || end > view.len) end = view.len;
    if (start < 0 || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "crc32c: start out of range");
        return NULL;
    }
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = kt_crc32c(0, (const uint8_t *)view.buf + start, (size_t)(end - start));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* check_batch(data, pos, size, origin, verify_crc) -> None
 *
 * `data[pos:pos+size]` is one whole batch (the caller has checked it fits).  Raises
 * RecordFormatError naming the absolute position (origin + index) of the bad field. */
PyObject *kt_py_check_batch(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, size, origin;
    int verify_crc;
    if (!PyArg_ParseTuple(args, "y*nnnp", &view, &pos, &size, &origin, &verify_crc))
        return NULL;
    kt_cursor c = {(const uint8_t *)view.buf, pos, view.len, origin, 0, 0};
    kt_error e;
    const uint8_t *b = c.buf + pos;
    if (kt_need(&c, size, &e, "record batch") || kt_need(&c, KT_HEADER_SIZE, &e, "batch header"))
        goto fail;
    if (b[16] != 2) {
        kt_fail(&c, pos + 16, &e, "unsupported record batch magic %d (only v2 is readable)", b[16]);
        goto fail;
    }
    if (verify_crc) {
        uint32_t stored = kt_be32(b + KT_CRC_OFFSET), computed;
        Py_BEGIN_ALLOW_THREADS
        computed = kt_crc32c(0, b + KT_ATTR_OFFSET, (size_t)(size - KT_ATTR_OFFSET));
        Py_END_ALLOW_THREADS
        if (kt_crc_mismatch(&c, pos, stored, computed, &e)) goto fail;
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    return kt_raise(&e);
}
