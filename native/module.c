/* kafka_tiered_source._native: the C fast path of the v2 record decoder.
 * See kafka_tiered_source/records/__init__.py for the interface both backends share. */
#include "records.h"
#include "crc32c.h"

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

static PyMethodDef methods[] = {
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
    if (PyType_Ready(&kt_BufferType) < 0 || PyType_Ready(&kt_BuilderType) < 0)
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
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
