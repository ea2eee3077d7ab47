/* kafka_tiered_source._native: the C fast path of the v2 record decoder, and the Avro value
 * decoder (avro.c; kafka_tiered_source/values/avro.py).
 * See kafka_tiered_source/records/__init__.py for the interface both backends share. */
#include "records.h"
#include "avro.h"
#include "crc32c.h"
#include "lz4.h"
#include "snappy.h"

#include <stdlib.h>

PyObject *kt_RecordFormatError;

PyObject *kt_raise(const kt_error *e)
{
    PyObject *args = Py_BuildValue("(sn)", e->msg, e->pos);
    if (args) {
        PyErr_SetObject(kt_RecordFormatError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *py_crc32c_impl(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(kt_crc32c_impl());
}

/* What lz4_decompress and snappy_decompress return: ValueError naming what the reader refused,
 * the size written into the caller's buffer, or the bytes; releases `given` or frees `out`. */
static PyObject *decompressed(const char *codec, const char *why, Py_buffer *given, uint8_t *out,
                              size_t have)
{
    PyObject *ret = NULL;
    if (why)
        PyErr_Format(PyExc_ValueError, "%s: %s", codec, why);
    else if (given->buf)
        ret = PyLong_FromSize_t(have);
    else
        ret = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)have);
    if (given->buf)
        PyBuffer_Release(given);
    else
        free(out);
    return ret;
}

/* lz4_decompress(frame, limit[, out]) -> bytes, or the size written into `out` (a writable
 * buffer, reused by the decode benchmark so that it times the reader, not page faults): the
 * whole frame through the block reader append_lz4 uses.  ValueError naming what the reader
 * refused, or the limit.  Tests compare it with python-lz4. */
static PyObject *py_lz4_decompress(PyObject *self, PyObject *args)
{
    Py_buffer view, given = {0};
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*n|w*", &view, &limit, &given)) return NULL;
    kt_lz4_frame f;
    const char *why = NULL;
    uint8_t *out = given.buf;
    size_t cap = given.buf ? (size_t)given.len : 0, have = 0;
    Py_BEGIN_ALLOW_THREADS
    if (kt_lz4_begin(&f, view.buf, (size_t)view.len, (uint64_t)limit) == KT_LZ4_BAD) {
        why = f.why;
    } else {
        for (;;) {
            if (cap - have < f.block_max + KT_LZ4_SLACK) {
                if (given.buf) {
                    why = "output buffer too small";
                    break;
                }
                size_t ncap = cap ? 2 * cap : 3 * (size_t)view.len + f.block_max + KT_LZ4_SLACK;
                while (ncap - have < f.block_max + KT_LZ4_SLACK) ncap *= 2;
                uint8_t *p = realloc(out, ncap);
                if (!p) {
                    why = "out of memory";
                    break;
                }
                out = p;
                cap = ncap;
            }
            size_t got;
            int k = kt_lz4_next(&f, out + have, &got);
            have += got;
            if (k == KT_LZ4_BAD) {
                why = f.why;
                break;
            }
            if (k == KT_LZ4_END) break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return decompressed("lz4", why, &given, out, have);
}

/* snappy_decompress(records, limit[, out]) -> bytes, or the size written into `out`: a batch's
 * snappy records (xerial-framed or one raw block) through the reader append_snappy uses.
 * ValueError naming what the reader refused, or the limit.  Tests compare it with cramjam. */
static PyObject *py_snappy_decompress(PyObject *self, PyObject *args)
{
    Py_buffer view, given = {0};
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*n|w*", &view, &limit, &given)) return NULL;
    kt_snappy_stream s;
    const char *why = NULL;
    uint8_t *out = NULL;
    size_t have = 0, cap = 0;
    Py_BEGIN_ALLOW_THREADS
    if (kt_snappy_begin(&s, view.buf, (size_t)view.len, (uint64_t)limit) == KT_SNAPPY_BAD) {
        why = s.why;
    } else {
        cap = (size_t)s.total + KT_SNAPPY_SLACK;
        if (given.buf) {
            out = given.buf;
            if ((size_t)given.len < cap) why = "output buffer too small";
        } else if (!(out = malloc(cap))) {
            why = "out of memory";
        }
        while (!why) {
            size_t got;
            int k = kt_snappy_next(&s, out + have, &got);
            have += got;
            if (k == KT_SNAPPY_BAD) why = s.why;
            if (k != KT_SNAPPY_BLOCK) break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return decompressed("snappy", why, &given, out, have);
}

static PyMethodDef methods[] = {
    {"lz4_decompress", py_lz4_decompress, METH_VARARGS,
     "lz4_decompress(frame, limit[, out]) -> bytes, or the size written into out "
     "(the block reader of Builder.append_lz4)"},
    {"snappy_decompress", py_snappy_decompress, METH_VARARGS,
     "snappy_decompress(records, limit[, out]) -> bytes, or the size written into out "
     "(the reader of Builder.append_snappy)"},
    {"crc32c", kt_py_crc32c, METH_VARARGS, "crc32c(data, start=0, end=len) -> int"},
    {"check_batch", kt_py_check_batch, METH_VARARGS,
     "check_batch(data, pos, size, origin, verify_crc): magic and CRC-32C of one batch"},
    {"fill_constant_columns", kt_py_fill_constant_columns, METH_VARARGS,
     "fill_constant_columns(topic_utf8, partition, offsets, data, values): the topic and partition columns"},
    {"crc32c_impl", py_crc32c_impl, METH_NOARGS, "'sse4.2' or 'table'"},
    {NULL}};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_native",
    .m_doc = "Native v2 record batch decoder.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    kt_crc32c_init();
    kt_snappy_init();
    if (PyType_Ready(&kt_BufferType) < 0 || PyType_Ready(&kt_BuilderType) < 0 ||
        kt_columns_type_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    kt_RecordFormatError = PyErr_NewException("kafka_tiered_source._native.RecordFormatError",
                                              PyExc_ValueError, NULL);
    if (!kt_RecordFormatError) goto fail;
    Py_INCREF(kt_RecordFormatError);
    if (PyModule_AddObject(m, "RecordFormatError", kt_RecordFormatError) < 0) goto fail;
    Py_INCREF(&kt_BuilderType);
    if (PyModule_AddObject(m, "Builder", (PyObject *)&kt_BuilderType) < 0) goto fail;
    Py_INCREF(&kt_BufferType);
    if (PyModule_AddObject(m, "Buffer", (PyObject *)&kt_BufferType) < 0) goto fail;
    Py_INCREF(kt_ColumnsType);
    if (PyModule_AddObject(m, "Columns", (PyObject *)kt_ColumnsType) < 0) goto fail;
    if (kt_rlm_register(m) < 0) goto fail;
    if (kt_rlm_replay_register(m) < 0) goto fail;
    if (kt_slots_register(m) < 0) goto fail;
    if (kt_avro_register(m) < 0) goto fail;
    /* i36j: Fetch answers as tuples for the KIP-1248 walk (fetch_answers.c) */
    if (kt_fetch_answers_register(m) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
