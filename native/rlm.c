/* The __remote_log_metadata selector: walk a metadata partition's v2 batches and hand back only
 * the records a planner replays, without a Python object per record passed over.
 *
 * Every metadata record's value starts with its frame (uvarint frame version 1, uvarint api key
 * 0-2, uvarint record version) and then the TopicIdPartition of the segment it is about: a
 * compact string (uvarint length + 1, the topic name) and the 16-byte topic id.  A planner wants
 * the records of a few topics; the metadata partition holds those of about 1/50 of the cluster.
 * This walk reads each record's value in place and keeps it only when its topic id is wanted, or
 * when it is not a record the walk recognises (the caller's decoder then names what is wrong).
 * Null values (KIP-1266 tombstones) and control batches are passed over; compressed batches are
 * handed back by position for the caller to decompress and walk the same way (the metadata
 * manager's producer sends them uncompressed unless configured otherwise).
 *
 * kafka_tiered_source/protocol/metadata_select.py holds the pure-Python twin, rule for rule, and
 * the interface both share. */
#include "records.h"
#include "crc32c.h"
#include "varint.h"

#include <stdlib.h>

#define KT_CONTROL_MASK 0x20
#define KT_CODEC_MASK 0x07

static int64_t be64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)kt_be32(p) << 32) | kt_be32(p + 4));
}

/* An unsigned varint as protocol.primitives.read_uvarint reads it (at most 5 bytes, any bits in
 * the last); -1 when the bytes end first or it is longer. */
static int uvarint(const uint8_t *p, Py_ssize_t n, Py_ssize_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (*pos >= n) return -1;
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int cmp16(const void *a, const void *b) { return memcmp(a, b, 16); }

/* Whether a value is kept: its topic id is one of `ids` (sorted, 16 bytes each), or it is not a
 * metadata record this walk recognises (remote_log_metadata.topic_id_of is None). */
static int selected(const uint8_t *v, Py_ssize_t n, const uint8_t *ids, Py_ssize_t nids)
{
    if (!ids) return 1;
    Py_ssize_t pos = 0;
    uint64_t frame, api_key, version, size;
    if (uvarint(v, n, &pos, &frame) || uvarint(v, n, &pos, &api_key) || uvarint(v, n, &pos, &version))
        return 1;
    if (frame != 1 || api_key > 2) return 1;
    if (uvarint(v, n, &pos, &size)) return 1;
    if (size > 1) {
        if (size - 1 > (uint64_t)(n - pos)) return 1;
        pos += (Py_ssize_t)(size - 1);
    }
    if (n - pos < 16) return 1;
    return bsearch(v + pos, ids, (size_t)nids, 16, cmp16) != NULL;
}

typedef struct {
    PyObject *hits;         /* [(offset, value bytes)] */
    PyObject *tombstones;   /* [(offset, key bytes or None)]: every null value, whatever its topic */
    const uint8_t *ids;
    Py_ssize_t nids;
    Py_ssize_t passed;      /* records passed over (other topics' and tombstones) */
    Py_ssize_t keyed;       /* records with a key (KIP-1266's compacted topic) */
    int decode;             /* hits as rows (rlm_rows.c) where the value is one it reads */
} kt_selection;

PyObject *kt_rlm_row(const uint8_t *v, Py_ssize_t n, long long offset);

/* The records of one uncompressed batch in c->buf[c->pos, c->end): `count` of them, then
 * nothing (Kafka's DefaultRecordBatch refuses bytes left after the last record). */
static int walk_records(kt_cursor *c, int32_t count, int64_t base, kt_selection *s, kt_error *e)
{
    for (int32_t i = 0; i < count; i++) {
        const Py_ssize_t start = c->pos;
        int32_t len = 0, off_delta = 0, klen = 0, vlen = 0, hcount = 0;
        int64_t ts_delta = 0;
        if (kt_varint(c, e, "record length", &len)) return -1;
        if (len < 6) return kt_fail(c, start, e, "invalid record length %d", (int)len);
        if (kt_need(c, len, e, "record")) return -1;
        kt_cursor r = *c;
        r.end = c->pos + len;
        r.pos += 1;   /* attributes: unused in v2 */
        if (kt_varlong(&r, e, "timestamp delta", &ts_delta)) return -1;
        if (kt_varint(&r, e, "offset delta", &off_delta)) return -1;
        if (kt_varint(&r, e, "key length", &klen)) return -1;
        if (klen < -1) return kt_fail(&r, r.pos - 1, e, "invalid key length %d", (int)klen);
        const Py_ssize_t kpos = r.pos;
        if (klen > 0) {
            if (kt_need(&r, klen, e, "record key")) return -1;
            r.pos += klen;
        }
        if (kt_varint(&r, e, "value length", &vlen)) return -1;
        if (vlen < -1) return kt_fail(&r, r.pos - 1, e, "invalid value length %d", (int)vlen);
        const Py_ssize_t vpos = r.pos;
        if (vlen > 0) {
            if (kt_need(&r, vlen, e, "record value")) return -1;
            r.pos += vlen;
        }
        if (kt_varint(&r, e, "header count", &hcount)) return -1;
        if (hcount < 0) return kt_fail(&r, r.pos - 1, e, "invalid header count %d", (int)hcount);
        for (int32_t h = 0; h < hcount; h++) {
            int32_t hk = 0, hv = 0;
            if (kt_varint(&r, e, "header key length", &hk)) return -1;
            if (hk < 0) return kt_fail(&r, r.pos - 1, e, "invalid header key length %d", (int)hk);
            if (kt_need(&r, hk, e, "header key")) return -1;
            r.pos += hk;
            if (kt_varint(&r, e, "header value length", &hv)) return -1;
            if (hv < -1) return kt_fail(&r, r.pos - 1, e, "invalid header value length %d", (int)hv);
            if (hv > 0) {
                if (kt_need(&r, hv, e, "header value")) return -1;
                r.pos += hv;
            }
        }
        if (r.pos != r.end)
            return kt_fail(&r, r.pos, e, "record length %d does not match its fields (%zd bytes)",
                           (int)len, r.pos - (c->pos));
        c->pos = r.end;
        if (klen >= 0) s->keyed++;
        if (vlen < 0) {
            PyObject *t = klen < 0 ? Py_BuildValue("(LO)", (long long)(base + off_delta), Py_None)
                                   : Py_BuildValue("(Ly#)", (long long)(base + off_delta),
                                                   (const char *)(r.buf + kpos), (Py_ssize_t)klen);
            if (!t) return -2;
            int bad = PyList_Append(s->tombstones, t);
            Py_DECREF(t);
            if (bad) return -2;
        }
        if (vlen < 0 || !selected(r.buf + vpos, vlen, s->ids, s->nids)) {
            s->passed++;
            continue;
        }
        PyObject *hit = NULL;
        if (s->decode) {
            hit = kt_rlm_row(r.buf + vpos, vlen, (long long)(base + off_delta));
            if (!hit && PyErr_Occurred()) return -2;
        }
        if (!hit)
            hit = Py_BuildValue("(Ly#)", (long long)(base + off_delta), (const char *)(r.buf + vpos),
                                (Py_ssize_t)vlen);
        if (!hit) return -2;
        int bad = PyList_Append(s->hits, hit);
        Py_DECREF(hit);
        if (bad) return -2;
    }
    if (c->pos != c->end)
        return kt_fail(c, c->pos, e, "%zd bytes after the last of the batch's %d records",
                       c->end - c->pos, (int)count);
    return 0;
}

/* rlm_select(data, origin, ids, verify_crc, decompressed_base=-1, decompressed_count=0, decode=0)
 *   -> (hits, consumed, next_offset, last_epoch, compressed, passed, error, tombstones, keyed)
 *
 * ids: None (keep every value) or the wanted topic ids, 16 bytes each, sorted.  hits: the kept
 * records, (offset, value).  consumed: bytes of the complete batches walked (a batch cut off by
 * the end of `data` is left, as a Fetch answer may end inside one).  next_offset: the last
 * offset of the last complete batch + 1 (-1: none).  last_epoch: that batch's
 * partitionLeaderEpoch (-1: none).  compressed: [(position, size)] of compressed data batches.
 * error: None, or (message, position, base offset) of the first malformed byte, with what came
 * before it in the other fields (the caller raises).  tombstones: (offset, key or None) of every
 * record with a null value, whatever its topic (the key says which copy it ends).  keyed: how
 * many records had a key.
 *
 * With decompressed_base >= 0, `data` is instead the decompressed records of one batch with that
 * base offset (origin: the batch's position): decompressed_count records, nothing else.
 *
 * With decode, a kept value that rlm_rows.c reads is handed back as its row (a tuple of 4 or
 * more items whose first is the record's api key and second its offset) instead of
 * (offset, value). */
static PyObject *py_rlm_select(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t origin;
    PyObject *ids_obj;
    int verify_crc;
    long long dbase = -1;
    int dcount = 0, decode = 0;
    if (!PyArg_ParseTuple(args, "y*nOp|Lip", &view, &origin, &ids_obj, &verify_crc, &dbase, &dcount, &decode))
        return NULL;
    PyObject *ret = NULL, *compressed = NULL, *err = Py_None;
    uint8_t *ids = NULL;
    kt_selection s = {PyList_New(0), PyList_New(0), NULL, 0, 0, 0, decode};
    if (!s.hits || !s.tombstones || !(compressed = PyList_New(0))) goto done;
    if (ids_obj != Py_None) {
        char *p;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(ids_obj, &p, &n) < 0) goto done;
        if (n % 16) {
            PyErr_SetString(PyExc_ValueError, "rlm_select: ids must be 16 bytes each");
            goto done;
        }
        /* sorted here, so bsearch holds whatever order the caller gave */
        if (!(ids = malloc(n ? (size_t)n : 1))) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(ids, p, (size_t)n);
        qsort(ids, (size_t)(n / 16), 16, cmp16);
        s.ids = ids;
        s.nids = n / 16;
    }
    const uint8_t *buf = view.buf;
    const Py_ssize_t n = view.len;
    Py_ssize_t pos = 0;
    long long next_offset = -1;
    int32_t last_epoch = -1;
    kt_error e;
    int64_t base = 0;
    int rc = 0;
    if (dbase >= 0) {
        kt_cursor c = {buf, 0, n, origin, 1, 0};
        base = dbase;
        rc = walk_records(&c, dcount, dbase, &s, &e);
        pos = n;
    }
    while (dbase < 0 && n - pos >= 12) {
        kt_cursor c = {buf, pos, n, origin, 0, 0};
        const uint8_t *b = buf + pos;
        base = be64(b);
        int32_t length = (int32_t)kt_be32(b + 8);
        if (length < KT_HEADER_SIZE - 12) {
            rc = kt_fail(&c, pos + 8, &e, "invalid batch length %d", (int)length);
            break;
        }
        Py_ssize_t size = (Py_ssize_t)length + 12;
        if (n - pos < size) {
            /* cut off by the end of the answer: left for the next fetch, unless the magic it
             * shows already says it is no batch */
            if (n - pos > 16 && b[16] != 2)
                rc = kt_fail(&c, pos + 16, &e,
                             "unsupported record batch magic %d (only v2 is readable)", b[16]);
            break;
        }
        if (b[16] != 2) {
            rc = kt_fail(&c, pos + 16, &e, "unsupported record batch magic %d (only v2 is readable)",
                         b[16]);
            break;
        }
        if (verify_crc) {
            uint32_t stored = kt_be32(b + KT_CRC_OFFSET);
            uint32_t computed = kt_crc32c(0, b + KT_ATTR_OFFSET, (size_t)(size - KT_ATTR_OFFSET));
            if ((rc = kt_crc_mismatch(&c, pos, stored, computed, &e))) break;
        }
        int attributes = (int)(((uint32_t)b[21] << 8) | b[22]);
        int32_t last_delta = (int32_t)kt_be32(b + 23);
        int32_t count = (int32_t)kt_be32(b + 57);
        if (!(attributes & KT_CONTROL_MASK)) {
            if (attributes & KT_CODEC_MASK) {
                PyObject *at = Py_BuildValue("(nn)", pos, size);
                if (!at || PyList_Append(compressed, at)) {
                    Py_XDECREF(at);
                    goto done;
                }
                Py_DECREF(at);
            } else if (count < 0) {
                rc = kt_fail(&c, pos + 57, &e, "invalid record count %d", (int)count);
                break;
            } else {
                c.pos = pos + KT_HEADER_SIZE;
                c.end = pos + size;
                if ((rc = walk_records(&c, count, base, &s, &e))) break;
            }
        }
        next_offset = (long long)(base + last_delta) + 1;
        last_epoch = (int32_t)kt_be32(b + 12);
        pos += size;
    }
    if (rc == -2) goto done;   /* a Python error (memory) */
    if (rc) {
        err = Py_BuildValue("(snL)", e.msg, e.pos, (long long)base);
        if (!err) goto done;
    } else {
        Py_INCREF(err);
    }
    ret = Py_BuildValue("(OnLiOnNOn)", s.hits, pos, next_offset, (int)last_epoch, compressed, s.passed, err,
                        s.tombstones, s.keyed);
done:
    free(ids);
    Py_XDECREF(s.hits);
    Py_XDECREF(s.tombstones);
    Py_XDECREF(compressed);
    PyBuffer_Release(&view);
    return ret;
}

static PyMethodDef rlm_methods[] = {
    {"rlm_select", py_rlm_select, METH_VARARGS,
     "rlm_select(data, origin, ids, verify_crc[, decompressed_base, decompressed_count, decode]) -> "
     "(hits, consumed, next_offset, last_epoch, compressed, passed, error, tombstones, keyed): the records of "
     "__remote_log_metadata batches whose topic id is wanted"},
    {NULL}};

int kt_rlm_register(PyObject *module) { return PyModule_AddFunctions(module, rlm_methods); }
