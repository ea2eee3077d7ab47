/* The Avro decoder's shared declarations: the compiled resolution (an instruction list built
 * by kafka_tiered_source/values/_avro_resolve.py, checked once by avro_program.c) and the Arrow
 * column builders the interpreter in avro.c writes into. */
#ifndef KT_AVRO_H
#define KT_AVRO_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* instruction kinds: the numbering of _avro_resolve.py */
enum {
    A_NOP, A_NULL, A_BOOL, A_INT_I32, A_INT_I64, A_INT_F32, A_INT_F64, A_INT_US, A_LONG_I64,
    A_LONG_F32, A_LONG_F64, A_LONG_US, A_FLOAT_F32, A_FLOAT_F64, A_DOUBLE_F64, A_BYTES, A_STRING,
    A_FIXED, A_FIXED_UUID, A_DEC_BYTES, A_DEC_FIXED, A_ENUM, A_RECORD, A_UNION, A_MEMBER, A_ARRAY,
    A_MAP, A_DEFAULT, A_ERROR, A_SKIP_BOOL, A_SKIP_INT, A_SKIP_LONG, A_SKIP_FLOAT, A_SKIP_DOUBLE,
    A_SKIP_BYTES, A_SKIP_FIXED, A_SKIP_ENUM, A_SKIP_RECORD, A_SKIP_UNION, A_SKIP_ARRAY, A_SKIP_MAP,
    A_KINDS
};

/* column kinds */
enum { AC_NULL, AC_BOOL, AC_I32, AC_I64, AC_F32, AC_F64, AC_D128, AC_BIN, AC_STRUCT, AC_LIST,
       AC_MAP, AC_KINDS };

#define KT_AVRO_DATA_DEPTH 128
#define KT_AVRO_ZERO_WIDTH_BUDGET ((int64_t)1 << 16)   /* and 8 per byte of the values */

typedef struct {
    int32_t kind, col, a, b, c;
} kt_aop;

typedef struct {
    int32_t kind, nchild, child;   /* children: prog->children[child .. child + nchild) */
} kt_acoldef;

/* _native.AvroProgram: immutable once made */
typedef struct {
    PyObject_HEAD
    kt_aop *ops;
    Py_ssize_t nops;
    int32_t *table;
    Py_ssize_t ntable;
    uint8_t *consts;
    int64_t *const_off;            /* constant i is consts[const_off[i], const_off[i + 1]) */
    Py_ssize_t nconsts;
    kt_acoldef *cols;
    Py_ssize_t ncols;
    int32_t *children;
    Py_ssize_t nchildren;
    int32_t root;
} kt_AvroProgram;

extern PyTypeObject kt_AvroProgramType;

/* a growable byte buffer */
typedef struct {
    uint8_t *p;
    Py_ssize_t len, cap;
} kt_abuf;

/* one output column being built */
typedef struct {
    int32_t kind;
    int width;                     /* bytes per value of fixed-width kinds */
    int has_null;                  /* `valid` is kept only once an entry was null */
    Py_ssize_t len;                /* entries */
    kt_abuf valid;                 /* validity bitmap (bits [0, len), once has_null) */
    kt_abuf data;                  /* values; BOOL: a bitmap; BIN, LIST, MAP: int32 offsets */
    kt_abuf var;                   /* BIN: the bytes */
} kt_acol;

int kt_abuf_grow(kt_abuf *b, Py_ssize_t need);

static inline int kt_abuf_reserve(kt_abuf *b, Py_ssize_t extra)
{
    return b->cap - b->len >= extra ? 0 : kt_abuf_grow(b, b->len + extra);
}

/* avro_program.c: column buffers in and out */
int kt_acols_init(const kt_AvroProgram *prog, kt_acol *cols, Py_ssize_t rows);
void kt_acols_free(kt_acol *cols, Py_ssize_t n);
/* a list of (length, null_count, validity, data, var) per column; frees the buffers */
PyObject *kt_acols_finish(kt_acol *cols, Py_ssize_t n);

/* avro.c */
PyObject *kt_py_avro_decode(PyObject *self, PyObject *args);
int kt_avro_register(PyObject *module);

#endif
