/* The record builder's state, shared by the record loop (records.c) and the readers that feed
 * it a piece at a time (fused.c). */
#ifndef KT_BUILDER_H
#define KT_BUILDER_H

#include "cursor.h"

/* growable byte vectors */
typedef struct {
    uint8_t *p;
    Py_ssize_t len, cap;
    Py_ssize_t last;   /* len when the previous Arrow batch took this column (vec_take) */
} kt_vec;

/* ---- Builder ---- */

typedef struct {
    PyObject_HEAD
    int include_headers;
    Py_ssize_t max_bytes;
    Py_ssize_t rows;
    kt_vec key_valid, key_offsets, key_data;
    Py_ssize_t key_nulls;
    kt_vec val_valid, val_offsets, val_data;
    Py_ssize_t val_nulls;
    kt_vec offsets, timestamps, ts_types;
    kt_vec hdr_valid, hdr_offsets;
    Py_ssize_t hdr_nulls, nheaders;
    kt_vec hk_offsets, hk_data;
    kt_vec hv_valid, hv_offsets, hv_data;
    Py_ssize_t hv_nulls;
    kt_vec scratch;   /* header spans of the record being parsed */
    kt_vec window;    /* append_lz4: the decompressed records not parsed yet */
} kt_Builder;

typedef struct {
    int64_t base_offset, base_timestamp, max_timestamp, min_offset, max_offset;
    int log_append;
} kt_batch_info;

enum { KT_OK = 0, KT_CORRUPT = -1, KT_NOMEM = -2, KT_FULL = 1 };

/* Parse up to *remaining records from the cursor's window (records.c). */
int kt_run_records(kt_Builder *b, kt_cursor *c, const kt_batch_info *bi, kt_error *e,
                   Py_ssize_t *remaining, const uint8_t *buf_end, int partial);
/* Size the columns for `win` record bytes; the GIL must be held. */
int kt_reserve_window(kt_Builder *b, Py_ssize_t win, Py_ssize_t remaining);
/* The error of records that end before the batch's records do. */
int kt_bytes_left(const kt_cursor *c, Py_ssize_t at, Py_ssize_t n, kt_error *e);

/* fused.c: Builder methods that decompress a batch a piece at a time and parse each piece */
PyObject *kt_builder_append_lz4(kt_Builder *b, PyObject *args);
PyObject *kt_builder_append_snappy(kt_Builder *b, PyObject *args);
PyObject *kt_builder_append_stream(kt_Builder *b, PyObject *args);

#endif
