/* __remote_log_metadata values decoded into compact rows: one tuple per record, no Python object
 * per field, for the planner's replay (planning/remote_log_state.py RemoteLogState.apply_row).
 *
 * A row is what kafka_tiered_source.protocol.remote_log_metadata.row_of makes of the record
 * the pure-Python codec decodes (that function is the twin and says what each field is):
 *
 *   (0, offset, topic id, partition, topic name, segment id, start offset, end offset,
 *    max timestamp ms, segment size, ((leader epoch, offset), ...) sorted, custom metadata,
 *    txn index empty, state, broker leader epoch)                 RemoteLogSegmentMetadataRecord
 *   (1, offset, topic id, partition, segment id, state, custom metadata, end offset)
 *                                                                RemoteLogSegmentMetadataUpdateRecord
 *   (2, offset, topic id, partition)                             RemotePartitionDeleteMetadataRecord
 *
 * ids are Kafka's Uuid strings (URL-safe base64, no padding).  This decoder is deliberately
 * narrower than the codec: it reads frame 1, api keys 0-2, versions 0-1, ASCII topic names, and
 * every length and tag in bounds and in order; any other value is declined (NULL, no error set)
 * and the caller decodes it with the codec, which reads it or says what is wrong with it.  So a
 * row is only ever what the codec would have made, and errors stay the codec's. */
#include "records.h"

#include <string.h>

typedef struct {
    const uint8_t *p;
    Py_ssize_t pos, n;
} rd_t;

/* An unsigned varint as protocol.primitives.read_uvarint reads it (at most 5 bytes). */
static int r_uvarint(rd_t *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (r->pos >= r->n) return -1;
        uint8_t b = r->p[r->pos++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int r_fixed(rd_t *r, int size, int64_t *out)
{
    if (r->n - r->pos < size) return -1;
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v = (v << 8) | r->p[r->pos + i];
    r->pos += size;
    if (size == 1) *out = (int8_t)v;
    else if (size == 4) *out = (int32_t)v;
    else *out = (int64_t)v;
    return 0;
}

static int r_tags(rd_t *r, const int sizes[2], int64_t vals[2]);

/* A tagged-field section of a struct with no known tags: skipped, tags ascending and in bounds. */
static int r_skip_tags(rd_t *r)
{
    static const int none[2] = {0, 0};
    int64_t unused[2];
    return r_tags(r, none, unused);
}

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Kafka's Uuid.toString(): 16 bytes as 22 characters of URL-safe base64 without padding. */
static PyObject *uuid_str(const uint8_t *u)
{
    char s[24];
    int k = 0;
    for (int i = 0; i < 15; i += 3) {
        uint32_t v = ((uint32_t)u[i] << 16) | ((uint32_t)u[i + 1] << 8) | u[i + 2];
        s[k++] = B64URL[(v >> 18) & 63];
        s[k++] = B64URL[(v >> 12) & 63];
        s[k++] = B64URL[(v >> 6) & 63];
        s[k++] = B64URL[v & 63];
    }
    s[k++] = B64URL[u[15] >> 2];
    s[k++] = B64URL[(u[15] & 3) << 4];
    return PyUnicode_FromStringAndSize(s, 22);
}

typedef struct {
    PyObject *name;                  /* the topic name (a new reference once read) */
    const uint8_t *topic_id;
    int64_t partition;
} tip_t;

/* TopicIdPartitionEntry: a compact string (not null, UTF-8 as the codec's str(raw, "utf-8")
 * reads it), a uuid, an int32, its tagged fields.  -1: declined; -2: out of memory. */
static int r_tip(rd_t *r, tip_t *t)
{
    uint64_t len;
    t->name = NULL;
    if (r_uvarint(r, &len) || len == 0 || len - 1 > (uint64_t)(r->n - r->pos)) return -1;
    t->name = PyUnicode_DecodeUTF8((const char *)(r->p + r->pos), (Py_ssize_t)(len - 1), NULL);
    if (!t->name) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -2;
        PyErr_Clear();
        return -1;
    }
    r->pos += (Py_ssize_t)(len - 1);
    if (r->n - r->pos < 16) return -1;
    t->topic_id = r->p + r->pos;
    r->pos += 16;
    return r_fixed(r, 4, &t->partition) || r_skip_tags(r) ? -1 : 0;
}

/* RemoteLogSegmentIdEntry: a TopicIdPartitionEntry, a uuid, its tagged fields. */
static int r_segment_id(rd_t *r, tip_t *t, const uint8_t **sid)
{
    int rc = r_tip(r, t);
    if (rc) return rc;
    if (r->n - r->pos < 16) return -1;
    *sid = r->p + r->pos;
    r->pos += 16;
    return r_skip_tags(r);
}

/* Compact nullable bytes: (position, length), length -1 for null. */
static int r_nullable_bytes(rd_t *r, Py_ssize_t *at, Py_ssize_t *len)
{
    uint64_t n;
    if (r_uvarint(r, &n)) return -1;
    if (n == 0) {
        *len = -1;
        return 0;
    }
    if (n - 1 > (uint64_t)(r->n - r->pos)) return -1;
    *at = r->pos;
    *len = (Py_ssize_t)(n - 1);
    r->pos += *len;
    return 0;
}

/* The top-level tagged fields: `sizes[tag]` (1, 4 or 8; 0 = unknown, skipped) are read into
 * `vals[tag]` (tags 0 and 1); a known tag whose size differs from its type's is declined. */
static int r_tags(rd_t *r, const int sizes[2], int64_t vals[2])
{
    uint64_t count, tag, size;
    int64_t last = -1;
    if (r_uvarint(r, &count)) return -1;
    for (uint64_t i = 0; i < count; i++) {
        if (r_uvarint(r, &tag) || (int64_t)tag <= last || r_uvarint(r, &size)) return -1;
        last = (int64_t)tag;
        if (size > (uint64_t)(r->n - r->pos)) return -1;
        if (tag < 2 && sizes[tag]) {
            if ((int)size != sizes[tag]) return -1;
            if (sizes[tag] == 1) {
                vals[tag] = r->p[r->pos] != 0;     /* a bool: any byte but 0 is true */
                r->pos += 1;
            } else if (r_fixed(r, sizes[tag], &vals[tag])) {
                return -1;
            }
        } else {
            r->pos += (Py_ssize_t)size;
        }
    }
    return 0;
}

static PyObject *nullable_bytes(const uint8_t *p, Py_ssize_t at, Py_ssize_t len)
{
    if (len < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)(p + at), len);
}

typedef struct {
    int32_t epoch;
    int64_t offset;
} epoch_t;

static PyObject *segment_row(rd_t *r, int version, long long offset)
{
    tip_t t;
    const uint8_t *sid;
    int64_t start, end, broker, max_ts, event_ts, size, state;
    uint64_t count;
    int rc = r_segment_id(r, &t, &sid);
    if (rc) {
        Py_XDECREF(t.name);
        return NULL;   /* declined, or out of memory (an error set) */
    }
    if (r_fixed(r, 8, &start) || r_fixed(r, 8, &end) || r_fixed(r, 4, &broker)
        || r_fixed(r, 8, &max_ts) || r_fixed(r, 8, &event_ts) || r_uvarint(r, &count) || count == 0
        || count - 1 > (uint64_t)(r->n - r->pos)) {
        Py_DECREF(t.name);
        return NULL;
    }
    Py_ssize_t epochs_n = (Py_ssize_t)(count - 1);
    epoch_t small[8], *epochs = small;
    if (epochs_n > 8 && !(epochs = PyMem_Malloc(sizeof(epoch_t) * (size_t)epochs_n))) {
        Py_DECREF(t.name);
        return PyErr_NoMemory();
    }
    PyObject *row = NULL, *tuple = NULL;
    Py_ssize_t cm_at = 0, cm_len = -1;
    for (Py_ssize_t i = 0; i < epochs_n; i++) {
        int64_t e, o;
        if (r_fixed(r, 4, &e) || r_fixed(r, 8, &o) || r_skip_tags(r)) goto done;
        /* insertion sort by (epoch, offset): the codec's reader sorts them so */
        Py_ssize_t j = i;
        while (j > 0 && (epochs[j - 1].epoch > e || (epochs[j - 1].epoch == e && epochs[j - 1].offset > o))) {
            epochs[j] = epochs[j - 1];
            j--;
        }
        epochs[j].epoch = (int32_t)e;
        epochs[j].offset = o;
    }
    int sizes[2] = {1, version >= 1 ? 4 : 0};
    int64_t tags[2] = {0, 0};
    if (r_fixed(r, 4, &size) || r_nullable_bytes(r, &cm_at, &cm_len) || r_fixed(r, 1, &state)
        || r_tags(r, sizes, tags) || r->pos != r->n)
        goto done;
    if (!(tuple = PyTuple_New(epochs_n))) goto done;
    for (Py_ssize_t i = 0; i < epochs_n; i++) {
        PyObject *pair = Py_BuildValue("(iL)", (int)epochs[i].epoch, (long long)epochs[i].offset);
        if (!pair) goto done;
        PyTuple_SET_ITEM(tuple, i, pair);
    }
    row = Py_BuildValue("(iLNLNNLLLLNNNiL)", 0, offset, uuid_str(t.topic_id), (long long)t.partition,
                        t.name, uuid_str(sid), (long long)start,
                        (long long)end, (long long)max_ts, (long long)size, tuple,
                        nullable_bytes(r->p, cm_at, cm_len), PyBool_FromLong((long)tags[0]),
                        (int)state, (long long)tags[1]);
    tuple = NULL;   /* stolen by N, even on failure */
    t.name = NULL;
done:
    Py_XDECREF(t.name);
    Py_XDECREF(tuple);
    if (epochs != small) PyMem_Free(epochs);
    return row;
}

static PyObject *update_row(rd_t *r, int version, long long offset)
{
    tip_t t;
    const uint8_t *sid;
    int64_t broker, event_ts, state;
    Py_ssize_t cm_at = 0, cm_len = -1;
    int sizes[2] = {version >= 1 ? 4 : 0, version >= 1 ? 8 : 0};
    int64_t tags[2] = {-1, -1};
    int rc = r_segment_id(r, &t, &sid);
    Py_XDECREF(t.name);      /* read for the codec's check only */
    if (rc || r_fixed(r, 4, &broker) || r_fixed(r, 8, &event_ts)
        || r_nullable_bytes(r, &cm_at, &cm_len) || r_fixed(r, 1, &state) || r_tags(r, sizes, tags) || r->pos != r->n)
        return NULL;
    return Py_BuildValue("(iLNLNiNL)", 1, offset, uuid_str(t.topic_id), (long long)t.partition, uuid_str(sid),
                         (int)state, nullable_bytes(r->p, cm_at, cm_len), (long long)tags[1]);
}

static PyObject *delete_row(rd_t *r, int version, long long offset)
{
    tip_t t;
    int64_t broker, event_ts, state;
    int sizes[2] = {version >= 1 ? 4 : 0, version >= 1 ? 8 : 0};
    int64_t tags[2] = {0, 0};
    int rc = r_tip(r, &t);
    Py_XDECREF(t.name);      /* read for the codec's check only */
    if (rc || r_fixed(r, 4, &broker) || r_fixed(r, 8, &event_ts) || r_fixed(r, 1, &state)
        || r_tags(r, sizes, tags) || r->pos != r->n)
        return NULL;
    return Py_BuildValue("(iLNL)", 2, offset, uuid_str(t.topic_id), (long long)t.partition);
}

/* The row of the metadata record in v[0, n) at `offset`; NULL with no error set: declined (the
 * codec decodes it); NULL with an error set: out of memory. */
PyObject *kt_rlm_row(const uint8_t *v, Py_ssize_t n, long long offset)
{
    rd_t r = {v, 0, n};
    uint64_t frame, api_key, version;
    if (r_uvarint(&r, &frame) || r_uvarint(&r, &api_key) || r_uvarint(&r, &version) || frame != 1 || version > 1)
        return NULL;
    switch (api_key) {
    case 0: return segment_row(&r, (int)version, offset);
    case 1: return update_row(&r, (int)version, offset);
    case 2: return delete_row(&r, (int)version, offset);
    default: return NULL;
    }
}
