/* Shared declarations of the native decoder's parts. */
#ifndef KT_RECORDS_H
#define KT_RECORDS_H

#include "cursor.h"

/* _native.RecordFormatError(message, position): the Python layer turns it into
 * kafka_tiered_source.errors.CorruptRecordError with the batch's base offset. */
extern PyObject *kt_RecordFormatError;
extern PyTypeObject kt_BufferType;
extern PyTypeObject kt_BuilderType;

/* Raise RecordFormatError from a filled kt_error.  Returns NULL. */
PyObject *kt_raise(const kt_error *e);

/* A read-only buffer that owns malloc'd memory; pyarrow wraps it without a copy. */
PyObject *kt_buffer_new(uint8_t *p, Py_ssize_t len, Py_ssize_t cap);

/* records.c */
PyObject *kt_py_fill_constant_columns(PyObject *self, PyObject *args);

/* batch.c */
PyObject *kt_py_crc32c(PyObject *self, PyObject *args);
PyObject *kt_py_check_batch(PyObject *self, PyObject *args);

#endif
