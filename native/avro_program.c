/* _native.AvroProgram: a compiled Avro resolution, checked once so that the interpreter
 * (avro.c) can trust every index it follows; and the column buffers it fills, handed to Python
 * as Buffers that pyarrow wraps without a copy. */
#include "avro.h"
#include "records.h"

#include <stdlib.h>
#include <string.h>

int kt_abuf_grow(kt_abuf *b, Py_ssize_t need)
{
    Py_ssize_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    uint8_t *p = realloc(b->p, (size_t)cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* ---- the program ---- */

static void program_dealloc(kt_AvroProgram *self)
{
    PyMem_Free(self->ops);
    PyMem_Free(self->table);
    PyMem_Free(self->consts);
    PyMem_Free(self->const_off);
    PyMem_Free(self->cols);
    PyMem_Free(self->children);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void *copy_out(const Py_buffer *v, size_t unit, Py_ssize_t *count)
{
    if (v->len % (Py_ssize_t)unit) {
        PyErr_SetString(PyExc_ValueError, "AvroProgram: a buffer's size is not a multiple of its item");
        return NULL;
    }
    *count = v->len / (Py_ssize_t)unit;
    void *p = PyMem_Malloc(v->len ? (size_t)v->len : 1);
    if (!p) return PyErr_NoMemory();
    if (v->len) memcpy(p, v->buf, (size_t)v->len);
    return p;
}

static int bad_program(const char *why, Py_ssize_t at)
{
    PyErr_Format(PyExc_ValueError, "AvroProgram: %s (item %zd)", why, at);
    return -1;
}

/* Which column kind each reading instruction writes (-1: any, -2: none). */
static int wants_column(int kind)
{
    switch (kind) {
    case A_NULL: case A_UNION: case A_DEFAULT: case A_ERROR: return -1;
    case A_BOOL: return AC_BOOL;
    case A_INT_I32: return AC_I32;
    case A_INT_I64: case A_INT_US: case A_LONG_I64: case A_LONG_US: return AC_I64;
    case A_INT_F32: case A_LONG_F32: case A_FLOAT_F32: return AC_F32;
    case A_INT_F64: case A_LONG_F64: case A_FLOAT_F64: case A_DOUBLE_F64: return AC_F64;
    case A_BYTES: case A_STRING: case A_FIXED: case A_FIXED_UUID: case A_ENUM: return AC_BIN;
    case A_DEC_BYTES: case A_DEC_FIXED: return AC_D128;
    case A_RECORD: case A_MEMBER: return AC_STRUCT;
    case A_ARRAY: return AC_LIST;
    case A_MAP: return AC_MAP;
    default: return -2;
    }
}

static int check_list(const kt_AvroProgram *g, int32_t a, int32_t n, Py_ssize_t i)
{
    if (a < 0 || n < 0 || (Py_ssize_t)a + n > g->ntable) return bad_program("list out of the table", i);
    for (int32_t k = 0; k < n; k++)
        if (g->table[a + k] < 0 || g->table[a + k] >= g->nops)
            return bad_program("list entry names no instruction", i);
    return 0;
}

static int check_program(const kt_AvroProgram *g)
{
    for (Py_ssize_t i = 0; i < g->ncols; i++) {
        const kt_acoldef *c = &g->cols[i];
        if (c->kind < 0 || c->kind >= AC_KINDS) return bad_program("unknown column kind", i);
        if (c->nchild < 0 || c->child < 0 || (Py_ssize_t)c->child + c->nchild > g->nchildren)
            return bad_program("column children out of range", i);
        int want = c->kind == AC_STRUCT ? c->nchild : c->kind == AC_LIST ? 1 : c->kind == AC_MAP ? 2 : 0;
        if (c->nchild != want) return bad_program("wrong number of column children", i);
        for (int32_t k = 0; k < c->nchild; k++) {
            int32_t ch = g->children[c->child + k];
            if (ch <= i || ch >= g->ncols) return bad_program("column child out of order", i);
        }
        if (c->kind == AC_MAP && g->cols[g->children[c->child]].kind != AC_BIN)
            return bad_program("map keys are not a binary column", i);
    }
    for (Py_ssize_t i = 0; i < g->nops; i++) {
        const kt_aop *o = &g->ops[i];
        if (o->kind < 0 || o->kind >= A_KINDS) return bad_program("unknown instruction", i);
        int want = wants_column(o->kind);
        if (want == -2 ? o->col != -1 : (o->col < 0 || o->col >= g->ncols))
            return bad_program("instruction column out of range", i);
        if (want >= 0 && g->cols[o->col].kind != want)
            return bad_program("instruction writes the wrong kind of column", i);
        switch (o->kind) {
        case A_FIXED: case A_SKIP_FIXED: case A_DEC_FIXED:
            if (o->a < 0) return bad_program("negative fixed size", i);
            if (o->kind == A_DEC_FIXED && (o->b < 1 || o->b > 38))
                return bad_program("decimal precision out of range", i);
            break;
        case A_FIXED_UUID:
            if (o->a != 16) return bad_program("uuid fixed is not 16 bytes", i);
            break;
        case A_DEC_BYTES:
            if (o->b < 1 || o->b > 38) return bad_program("decimal precision out of range", i);
            break;
        case A_ENUM:
            if (o->a < 0 || o->b < 0 || (Py_ssize_t)o->a + o->b > g->ntable)
                return bad_program("enum map out of the table", i);
            for (int32_t k = 0; k < o->b; k++) {
                int32_t e = g->table[o->a + k];
                int64_t ci = e >= 0 ? e : -1 - (int64_t)e;
                if (ci >= g->nconsts) return bad_program("enum entry names no constant", i);
            }
            break;
        case A_SKIP_ENUM:
            if (o->b < 0) return bad_program("negative symbol count", i);
            break;
        case A_RECORD: case A_UNION: case A_SKIP_RECORD: case A_SKIP_UNION:
            if (check_list(g, o->a, o->b, i)) return -1;
            break;
        case A_MEMBER:
            if (o->a < 0 || o->a >= g->nops || o->b < 0 || o->b >= g->cols[o->col].nchild)
                return bad_program("member out of range", i);
            break;
        case A_ARRAY: case A_MAP: case A_SKIP_ARRAY: case A_SKIP_MAP:
            if (o->a < 0 || o->a >= g->nops || o->b < 0) return bad_program("bad item instruction", i);
            if ((o->kind == A_MAP || o->kind == A_SKIP_MAP) && o->b < 1)
                return bad_program("map entries take at least a byte", i);
            break;
        case A_DEFAULT:
            if (o->a < 0 || o->a >= g->nconsts || o->b < 0 || o->b >= g->nops)
                return bad_program("default out of range", i);
            break;
        case A_ERROR:
            if (o->a < 0 || o->a >= g->nconsts) return bad_program("error message out of range", i);
            break;
        }
    }
    if (g->root < 0 || g->root >= g->nops || g->ncols < 1) return bad_program("no root", 0);
    for (Py_ssize_t i = 0; i < g->nconsts; i++)
        if (g->const_off[i] < 0 || g->const_off[i] > g->const_off[i + 1])
            return bad_program("constant offsets out of order", i);
    return 0;
}

/* AvroProgram(ops, table, consts, const_offsets, columns, children, root): int32 rows of
 * (kind, col, a, b, c); int32 lists; the constants' bytes and their int64 offsets (one more
 * than there are constants); int32 rows of (kind, nchild, child); int32 child column indexes. */
static PyObject *program_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Py_buffer ops, table, consts, off, cols, children;
    int root;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*i", &ops, &table, &consts, &off, &cols, &children, &root))
        return NULL;
    kt_AvroProgram *g = (kt_AvroProgram *)type->tp_alloc(type, 0);
    Py_ssize_t noff = 0, nbytes = 0;
    if (g) {
        g->root = root;
        if (!(g->ops = copy_out(&ops, sizeof(kt_aop), &g->nops)) ||
            !(g->table = copy_out(&table, 4, &g->ntable)) ||
            !(g->consts = copy_out(&consts, 1, &nbytes)) ||
            !(g->const_off = copy_out(&off, 8, &noff)) ||
            !(g->cols = copy_out(&cols, sizeof(kt_acoldef), &g->ncols)) ||
            !(g->children = copy_out(&children, 4, &g->nchildren))) {
            Py_CLEAR(g);
        } else {
            g->nconsts = noff - 1;
            if (noff < 1 || g->const_off[noff - 1] != nbytes) {
                bad_program("constant offsets do not end at the constants' size", noff);
                Py_CLEAR(g);
            } else if (check_program(g)) {
                Py_CLEAR(g);
            }
        }
    }
    PyBuffer_Release(&ops);
    PyBuffer_Release(&table);
    PyBuffer_Release(&consts);
    PyBuffer_Release(&off);
    PyBuffer_Release(&cols);
    PyBuffer_Release(&children);
    return (PyObject *)g;
}

PyTypeObject kt_AvroProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafka_tiered_source._native.AvroProgram",
    .tp_basicsize = sizeof(kt_AvroProgram),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = program_new,
    .tp_doc = "A compiled Avro schema resolution (values/_avro_resolve.py), checked when made.",
};

/* ---- columns ---- */

static const int widths[AC_KINDS] = {
    [AC_I32] = 4, [AC_I64] = 8, [AC_F32] = 4, [AC_F64] = 8, [AC_D128] = 16,
};

int kt_acols_init(const kt_AvroProgram *prog, kt_acol *cols, Py_ssize_t rows)
{
    memset(cols, 0, sizeof(kt_acol) * (size_t)prog->ncols);
    for (Py_ssize_t i = 0; i < prog->ncols; i++) {
        kt_acol *c = &cols[i];
        c->kind = prog->cols[i].kind;
        c->width = widths[c->kind];
        if (c->kind == AC_BIN || c->kind == AC_LIST || c->kind == AC_MAP) {
            if (kt_abuf_reserve(&c->data, 4 * (i == 0 ? rows + 1 : 16))) return -1;
            memset(c->data.p, 0, 4);
            c->data.len = 4;           /* the first offset, 0 */
        } else if (i == 0 && c->width && kt_abuf_reserve(&c->data, c->width * rows)) {
            return -1;
        }
    }
    return 0;
}

void kt_acols_free(kt_acol *cols, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        free(cols[i].valid.p);
        free(cols[i].data.p);
        free(cols[i].var.p);
    }
}

static PyObject *take(kt_abuf *b, Py_ssize_t len)
{
    uint8_t *p = b->p;
    if (!p && !(p = malloc(1))) return PyErr_NoMemory();
    PyObject *out = kt_buffer_new(p, len, b->p ? b->cap : 1);
    b->p = NULL;
    b->len = b->cap = 0;
    return out;
}

static Py_ssize_t count_nulls(const kt_abuf *v, Py_ssize_t len)
{
    Py_ssize_t set = 0, full = len >> 3;
    for (Py_ssize_t i = 0; i < full; i++) set += __builtin_popcount(v->p[i]);
    if (len & 7) set += __builtin_popcount(v->p[full] & ((1u << (len & 7)) - 1));
    return len - set;
}

PyObject *kt_acols_finish(kt_acol *cols, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    if (!out) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        kt_acol *c = &cols[i];
        Py_ssize_t len = c->len, bits = (len + 7) >> 3;
        PyObject *valid = NULL, *data = NULL, *var = NULL, *item;
        Py_ssize_t nulls = c->kind == AC_NULL ? len : c->has_null && len ? count_nulls(&c->valid, len) : 0;
        if (c->kind == AC_NULL) {
            valid = Py_NewRef(Py_None);
            data = Py_NewRef(Py_None);
        } else {
            valid = nulls && c->kind != AC_NULL ? take(&c->valid, bits) : Py_NewRef(Py_None);
            Py_ssize_t dlen = c->kind == AC_BOOL ? bits : c->width ? len * c->width
                              : c->kind == AC_STRUCT ? 0 : 4 * (len + 1);
            data = c->kind == AC_STRUCT ? Py_NewRef(Py_None) : take(&c->data, dlen);
        }
        var = c->kind == AC_BIN ? take(&c->var, c->var.len) : Py_NewRef(Py_None);
        if (!valid || !data || !var) {
            Py_XDECREF(valid);
            Py_XDECREF(data);
            Py_XDECREF(var);
            goto fail;
        }
        item = Py_BuildValue("(nnNNN)", len, nulls, valid, data, var);
        if (!item) goto fail;
        PyList_SET_ITEM(out, i, item);
    }
    kt_acols_free(cols, n);
    return out;
fail:
    Py_XDECREF(out);
    kt_acols_free(cols, n);
    return NULL;
}
