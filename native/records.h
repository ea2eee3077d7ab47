/* Shared declarations of the native decoder's parts. */
#ifndef KT_RECORDS_H
#define KT_RECORDS_H

#include "cursor.h"

/* _native.RecordFormatError(message, position): the Python layer turns it into
 * kafka_tiered_source.errors.CorruptRecordError with the batch's base offset. */
extern PyObject *kt_RecordFormatError;
extern PyTypeObject kt_BufferType;
extern PyTypeObject kt_BuilderType;
extern PyTypeObject *kt_ColumnsType;   /* Builder.finish()'s result */
int kt_columns_type_init(void);

/* Raise RecordFormatError from a filled kt_error.  Returns NULL. */
PyObject *kt_raise(const kt_error *e);

/* A read-only buffer that owns malloc'd memory; pyarrow wraps it without a copy. */
PyObject *kt_buffer_new(uint8_t *p, Py_ssize_t len, Py_ssize_t cap);

/* records.c */
PyObject *kt_py_fill_constant_columns(PyObject *self, PyObject *args);

/* batch.c: the v2 batch header's layout, and its CRC-32C check */
#define KT_HEADER_SIZE 61
#define KT_CRC_OFFSET 17
#define KT_ATTR_OFFSET 21   /* the CRC covers [attributes, end of batch) */
uint32_t kt_be32(const uint8_t *p);
/* 0 when equal, else fills e (naming the CRC field of the batch at c->buf[pos]) and -1. */
int kt_crc_mismatch(const kt_cursor *c, Py_ssize_t pos, uint32_t stored, uint32_t computed,
                    kt_error *e);
PyObject *kt_py_crc32c(PyObject *self, PyObject *args);
PyObject *kt_py_check_batch(PyObject *self, PyObject *args);

/* rlm.c: the __remote_log_metadata selector (rlm_select) */
int kt_rlm_register(PyObject *module);
/* rlm_replay.c: its rows applied to the planner's replayed state (rlm_apply) */
int kt_rlm_replay_register(PyObject *module);
int kt_slots_register(PyObject *module);      /* slots_maker */
/* fetch_answers.c: Fetch responses as one tuple per partition (fetch_answers) */
int kt_fetch_answers_register(PyObject *module);

#endif
