/* Fetch responses (flexible versions 12-18) decoded into one tuple per partition, for the
 * KIP-1248 walk (planning/kip1248.py through protocol/rounds.py): no struct object per partition,
 * no default DivergingEpoch/CurrentLeader/SnapshotId made for each.
 *
 * The result is what kafka_tiered_source.protocol.fetch_answers makes of the response the codec
 * decodes (its `partition_of` is the twin and says what each field is):
 *
 *   (throttle_time_ms, error_code, ((topic name or None, topic id or None, (partition, ...)), ...))
 *   partition: (index, error code, high watermark, last stable offset, log start offset,
 *               aborted ((producer id, first offset), ...) or None, preferred read replica,
 *               records (a memoryview into the frame, b"" when empty, None when null),
 *               segment id (Kafka's Uuid string, None when absent or zero), custom metadata, start position,
 *               end position, base offset, end offset, storage format, signed location)
 *
 * Like rlm_rows.c it is deliberately narrower than the codec: any value out of bounds, a tag out
 * of order, a known tag of the wrong size, bytes left over, text that is not UTF-8 is declined
 * (None, no error set) and the caller decodes the response with the codec, which reads it or
 * says what is wrong with it and where.  So a tuple is only ever what the codec would have made. */
#include "records.h"

typedef struct {
    const uint8_t *p;
    Py_ssize_t pos, n;
} fa_rd;

#define DECLINE (-1)
#define NOMEM (-2)

static int fa_uvarint(fa_rd *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (r->pos >= r->n) return DECLINE;
        uint8_t b = r->p[r->pos++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return DECLINE;
}

static int fa_int(fa_rd *r, int size, int64_t *out)
{
    if (r->n - r->pos < size) return DECLINE;
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v = (v << 8) | r->p[r->pos + i];
    r->pos += size;
    if (size == 2) *out = (int16_t)v;
    else if (size == 4) *out = (int32_t)v;
    else *out = (int64_t)v;
    return 0;
}

/* One tagged field's tag and size, the tag above the section's previous one (``*last``) and the
 * size within the frame; the cursor left at the field's body. */
static int fa_tag_header(fa_rd *r, int64_t *last, uint64_t *tag, uint64_t *size)
{
    if (fa_uvarint(r, tag) || (int64_t)*tag <= *last || fa_uvarint(r, size) ||
        *size > (uint64_t)(r->n - r->pos))
        return DECLINE;
    *last = (int64_t)*tag;
    return 0;
}

/* A tagged-field section whose tags are all skipped (in bounds, ascending). */
static int fa_skip_tags(fa_rd *r)
{
    uint64_t count, tag, size;
    int64_t last = -1;
    if (fa_uvarint(r, &count)) return DECLINE;
    for (uint64_t i = 0; i < count; i++) {
        if (fa_tag_header(r, &last, &tag, &size)) return DECLINE;
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* A struct of fixed fields `sizes` then its tagged section, exactly `size` bytes long (the
 * tagged DivergingEpoch, CurrentLeader and SnapshotId, which the walk does not use). */
static int fa_skip_struct(fa_rd *r, uint64_t size, const int *sizes, int n)
{
    if (size > (uint64_t)(r->n - r->pos)) return DECLINE;
    fa_rd in = {r->p, r->pos, r->pos + (Py_ssize_t)size};
    int64_t unused;
    for (int i = 0; i < n; i++)
        if (fa_int(&in, sizes[i], &unused)) return DECLINE;
    if (fa_skip_tags(&in) || in.pos != in.n) return DECLINE;
    r->pos = in.n;
    return 0;
}

/* Compact text: (0, value) or NULL with DECLINE / NOMEM in *rc.  `nullable`: length 0 is None. */
static PyObject *fa_text(fa_rd *r, int nullable, int *rc)
{
    uint64_t len;
    if (fa_uvarint(r, &len) || (len == 0 && !nullable) ||
        (len && len - 1 > (uint64_t)(r->n - r->pos))) {
        *rc = DECLINE;
        return NULL;
    }
    if (len == 0) Py_RETURN_NONE;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)(r->p + r->pos), (Py_ssize_t)(len - 1), NULL);
    if (!s) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            *rc = NOMEM;
            return NULL;
        }
        PyErr_Clear();
        *rc = DECLINE;
        return NULL;
    }
    r->pos += (Py_ssize_t)(len - 1);
    return s;
}

static const char FA_B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Kafka's Uuid.toString(): 16 bytes as 22 characters of URL-safe base64 without padding. */
static PyObject *fa_uuid_str(const uint8_t *u)
{
    char s[22];
    int k = 0;
    for (int i = 0; i < 15; i += 3) {
        uint32_t v = ((uint32_t)u[i] << 16) | ((uint32_t)u[i + 1] << 8) | u[i + 2];
        s[k++] = FA_B64URL[(v >> 18) & 63];
        s[k++] = FA_B64URL[(v >> 12) & 63];
        s[k++] = FA_B64URL[(v >> 6) & 63];
        s[k++] = FA_B64URL[v & 63];
    }
    s[k++] = FA_B64URL[u[15] >> 2];
    s[k++] = FA_B64URL[(u[15] & 3) << 4];
    return PyUnicode_FromStringAndSize(s, 22);
}

enum { F_INDEX, F_ERROR, F_HWM, F_LSO, F_LOG_START, F_ABORTED, F_PREFERRED, F_RECORDS, F_SEGMENT_ID,
       F_CUSTOM, F_START, F_END, F_BASE, F_END_OFFSET, F_FORMAT, F_SIGNED, N_FIELDS };

static int fa_set_int(PyObject *t, int i, int64_t v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (!o) return NOMEM;
    PyTuple_SET_ITEM(t, i, o);
    return 0;
}

static int fa_aborted(fa_rd *r, PyObject *t)
{
    uint64_t n;
    if (fa_uvarint(r, &n)) return DECLINE;
    if (n == 0) {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(t, F_ABORTED, Py_None);
        return 0;
    }
    n -= 1;
    if (n > (uint64_t)(r->n - r->pos) / 17) return DECLINE;     /* 8 + 8 + an empty tag section */
    PyObject *list = PyTuple_New((Py_ssize_t)n);
    if (!list) return NOMEM;
    PyTuple_SET_ITEM(t, F_ABORTED, list);
    for (uint64_t i = 0; i < n; i++) {
        int64_t pid, first;
        if (fa_int(r, 8, &pid) || fa_int(r, 8, &first) || fa_skip_tags(r)) return DECLINE;
        PyObject *e = Py_BuildValue("(LL)", (long long)pid, (long long)first);
        if (!e) return NOMEM;
        PyTuple_SET_ITEM(list, (Py_ssize_t)i, e);
    }
    return 0;
}

/* The partition's tagged section: the KIP-1248 location fields read, the rest skipped. */
static int fa_partition_tags(fa_rd *r, PyObject *t)
{
    static const int diverging[] = {4, 8}, leader[] = {4, 4}, snapshot[] = {8, 4};
    uint64_t count, tag, size;
    int64_t last = -1, v = 0;
    if (fa_uvarint(r, &count)) return DECLINE;
    for (uint64_t i = 0; i < count; i++) {
        if (fa_tag_header(r, &last, &tag, &size)) return DECLINE;
        Py_ssize_t end = r->pos + (Py_ssize_t)size;
        fa_rd in = {r->p, r->pos, end};
        int rc = 0, slot = -1, width = 0;
        PyObject *o = NULL;
        switch (tag) {
        case 0: rc = fa_skip_struct(r, size, diverging, 2); break;
        case 1: rc = fa_skip_struct(r, size, leader, 2); break;
        case 2: rc = fa_skip_struct(r, size, snapshot, 2); break;
        case 100:                                   /* RemoteLogSegmentId, uuid */
            if (size != 16) return DECLINE;
            {
                int zero = 1;
                for (int k = 0; k < 16; k++) zero &= r->p[r->pos + k] == 0;
                if (!zero) {
                    o = fa_uuid_str(r->p + r->pos);
                    if (!o) return NOMEM;
                    slot = F_SEGMENT_ID;
                }
            }
            break;
        case 101: {                                 /* RemoteLogSegmentCustomMetadata, bytes? */
            uint64_t len;
            if (fa_uvarint(&in, &len) || (len && len - 1 != (uint64_t)(in.n - in.pos))) return DECLINE;
            if (len == 0) {
                if (in.pos != in.n) return DECLINE;
                o = Py_None;
                Py_INCREF(o);
            } else {
                o = PyBytes_FromStringAndSize((const char *)(r->p + in.pos), (Py_ssize_t)(len - 1));
                if (!o) return NOMEM;
            }
            slot = F_CUSTOM;
            break;
        }
        case 102: slot = F_START; width = 4; break;
        case 103: slot = F_END; width = 4; break;
        case 104: slot = F_BASE; width = 8; break;
        case 105: slot = F_END_OFFSET; width = 8; break;
        case 106: case 107:                         /* StorageFormatVersion, SignedRemoteLogSegmentLocation */
            o = fa_text(&in, tag == 107, &rc);
            if (!o) return rc;
            if (in.pos != in.n) {
                Py_DECREF(o);
                return DECLINE;
            }
            slot = tag == 106 ? F_FORMAT : F_SIGNED;
            break;
        default: break;                             /* unknown: skipped, as the codec keeps it aside */
        }
        if (rc) return rc;
        if (width) {
            if (size != (uint64_t)width) return DECLINE;
            fa_int(&in, width, &v);
            o = PyLong_FromLongLong(v);
            if (!o) return NOMEM;
        }
        if (slot >= 0) {
            PyObject *old = PyTuple_GET_ITEM(t, slot);
            PyTuple_SET_ITEM(t, slot, o);
            Py_XDECREF(old);
        }
        r->pos = end;
    }
    return 0;
}

static PyObject *fa_partition(fa_rd *r, PyObject *frame, int *rc)
{
    static PyObject *empty_bytes, *default_format;
    if (!empty_bytes && !(empty_bytes = PyBytes_FromStringAndSize("", 0))) goto nomem;
    if (!default_format && !(default_format = PyUnicode_FromString(""))) goto nomem;
    PyObject *t = PyTuple_New(N_FIELDS);
    if (!t) goto nomem;
    static const int sizes[] = {4, 2, 8, 8, 8};
    int64_t v;
    for (int i = 0; i <= F_LOG_START; i++) {
        if (fa_int(r, sizes[i], &v)) {
            *rc = DECLINE;
            goto fail;
        }
        if ((*rc = fa_set_int(t, i, v))) goto fail;
    }
    if ((*rc = fa_aborted(r, t))) goto fail;
    if (fa_int(r, 4, &v)) {
        *rc = DECLINE;
        goto fail;
    }
    if ((*rc = fa_set_int(t, F_PREFERRED, v))) goto fail;
    uint64_t len;
    if (fa_uvarint(r, &len) || (len && len - 1 > (uint64_t)(r->n - r->pos))) {
        *rc = DECLINE;
        goto fail;
    }
    PyObject *records;
    if (len == 0) {
        records = Py_None;
        Py_INCREF(records);
    } else if (len == 1) {
        records = empty_bytes;
        Py_INCREF(records);
    } else {
        PyObject *slice = PySlice_New(NULL, NULL, NULL), *lo = PyLong_FromSsize_t(r->pos),
                 *hi = PyLong_FromSsize_t(r->pos + (Py_ssize_t)(len - 1));
        records = NULL;
        if (slice && lo && hi) {
            Py_DECREF(slice);
            slice = PySlice_New(lo, hi, NULL);
            if (slice) records = PyObject_GetItem(frame, slice);
        }
        Py_XDECREF(slice);
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        if (!records) goto nomem_t;
        r->pos += (Py_ssize_t)(len - 1);
    }
    PyTuple_SET_ITEM(t, F_RECORDS, records);
    /* the location fields' defaults (the declarations' in protocol/messages.py) */
    Py_INCREF(Py_None);
    PyTuple_SET_ITEM(t, F_SEGMENT_ID, Py_None);
    Py_INCREF(Py_None);
    PyTuple_SET_ITEM(t, F_CUSTOM, Py_None);
    for (int i = F_START; i <= F_END_OFFSET; i++)
        if ((*rc = fa_set_int(t, i, -1))) goto fail;
    Py_INCREF(default_format);
    PyTuple_SET_ITEM(t, F_FORMAT, default_format);
    Py_INCREF(Py_None);
    PyTuple_SET_ITEM(t, F_SIGNED, Py_None);
    if ((*rc = fa_partition_tags(r, t))) goto fail;
    return t;
nomem_t:
    *rc = NOMEM;
fail:
    Py_XDECREF(t);
    return NULL;
nomem:
    *rc = NOMEM;
    return NULL;
}

static PyObject *fa_topic(fa_rd *r, PyObject *frame, int by_id, int *rc)
{
    PyObject *name = NULL, *id = NULL, *parts = NULL;
    if (by_id) {
        if (r->n - r->pos < 16) {
            *rc = DECLINE;
            return NULL;
        }
        if (!(id = PyBytes_FromStringAndSize((const char *)(r->p + r->pos), 16))) goto nomem;
        r->pos += 16;
        name = Py_None;
        Py_INCREF(name);
    } else {
        if (!(name = fa_text(r, 0, rc))) return NULL;
        id = Py_None;
        Py_INCREF(id);
    }
    uint64_t n;
    if (fa_uvarint(r, &n) || n == 0 || n - 1 > (uint64_t)(r->n - r->pos) / 36) {   /* a partition >= 36 bytes */
        *rc = DECLINE;
        goto fail;
    }
    if (!(parts = PyTuple_New((Py_ssize_t)(n - 1)))) goto nomem;
    for (uint64_t i = 0; i + 1 < n; i++) {
        PyObject *p = fa_partition(r, frame, rc);
        if (!p) goto fail;
        PyTuple_SET_ITEM(parts, (Py_ssize_t)i, p);
    }
    if (fa_skip_tags(r)) {
        *rc = DECLINE;
        goto fail;
    }
    PyObject *out = PyTuple_Pack(3, name, id, parts);
    if (!out) goto nomem;
    Py_DECREF(name);
    Py_DECREF(id);
    Py_DECREF(parts);
    return out;
nomem:
    *rc = NOMEM;
fail:
    Py_XDECREF(name);
    Py_XDECREF(id);
    Py_XDECREF(parts);
    return NULL;
}

/* fetch_answers(frame, pos, version) -> (throttle, error, topics) or None (declined). */
static PyObject *py_fetch_answers(PyObject *self, PyObject *args)
{
    PyObject *frame;
    Py_ssize_t pos;
    int version;
    if (!PyArg_ParseTuple(args, "Oni", &frame, &pos, &version)) return NULL;
    if (version < 12 || version > 18) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) return NULL;
    fa_rd r = {(const uint8_t *)view.buf, pos, view.len};
    PyObject *topics = NULL, *out = NULL;
    int rc = DECLINE;
    int64_t throttle, error, session;
    uint64_t n;
    if (pos < 0 || pos > view.len || fa_int(&r, 4, &throttle) || fa_int(&r, 2, &error) ||
        fa_int(&r, 4, &session) || fa_uvarint(&r, &n) || n == 0 || n - 1 > (uint64_t)(r.n - r.pos))
        goto done;
    if (!(topics = PyTuple_New((Py_ssize_t)(n - 1)))) {
        rc = NOMEM;
        goto done;
    }
    for (uint64_t i = 0; i + 1 < n; i++) {
        PyObject *t = fa_topic(&r, frame, version >= 13, &rc);
        if (!t) goto done;
        PyTuple_SET_ITEM(topics, (Py_ssize_t)i, t);
    }
    /* the top level's tags (NodeEndpoints, v16+) are not the walk's: skipped, checked in bounds */
    if (fa_skip_tags(&r) || r.pos != r.n) {
        rc = DECLINE;
        goto done;
    }
    out = Py_BuildValue("(LLO)", (long long)throttle, (long long)error, topics);
    rc = out ? 0 : NOMEM;
done:
    PyBuffer_Release(&view);
    Py_XDECREF(topics);
    if (rc == NOMEM) return NULL;
    if (rc == DECLINE) Py_RETURN_NONE;
    return out;
}

static PyMethodDef fetch_answers_methods[] = {
    {"fetch_answers", py_fetch_answers, METH_VARARGS,
     "fetch_answers(frame, pos, version) -> (throttle, error, topics) or None (declined: use the codec)"},
    {NULL}};

int kt_fetch_answers_register(PyObject *module)
{
    return PyModule_AddFunctions(module, fetch_answers_methods);
}
