/* The replay of __remote_log_metadata rows (native/rlm_rows.c) applied in C: the common state
 * changes of RemoteLogState.apply_row (planning/remote_log_state.py), made on the same objects.
 *
 * rlm_apply(rows, mp, partitions, copy_type, apply_row) applies each row in order, as
 * apply_row(row, mp) would.  Only the usual changes are made here:
 *
 *   a segment record in COPY_SEGMENT_STARTED of a copy its partition has not seen
 *       -> a new CopyMeta (RemoteLogMetadataCache.addCopyInProgressSegment);
 *   an update to COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED or DELETE_SEGMENT_FINISHED that
 *   RemoteLogSegmentState.isValidTransition allows, of a copy the partition's generation may
 *   change in place -> the copy changed; a finished copy of one leader epoch that starts after
 *   every mapping of its epoch is appended to the epoch's map here, any other goes through
 *   PartitionState._finished; a delete's unmapping through PartitionState._unmapped.
 *
 * Every other row (a partition not seen yet, a repeated or illegal transition, an update of an
 * unknown copy, a partition delete, anything not shaped as a row) goes through apply_row itself,
 * the pure-Python reference, which logs what Kafka ignores.  So the state is the one apply_row
 * makes, row for row; tests/test_replay_native.py replays the same random histories both ways. */
#include <Python.h>
#include <structmember.h>

#include "records.h"

enum { STARTED = 0, FINISHED = 1, DELETE_STARTED = 2, DELETE_FINISHED = 3 };

static PyObject *s_copies, *s_gen, *s_readable, *s_epochs, *s_state, *s_order, *s_segment,
    *s_custom, *s_end, *s_start, *s_leader_epochs, *s_keys, *s_ids, *s_highest, *s_finished, *s_unmapped;

static int names_ready(void)
{
    if (s_unmapped) return 0;
#define NAME(var, text) if (!(var = PyUnicode_InternFromString(text))) return -1
    NAME(s_copies, "copies"); NAME(s_gen, "gen"); NAME(s_readable, "_readable");
    NAME(s_epochs, "epochs"); NAME(s_state, "state"); NAME(s_order, "order");
    NAME(s_segment, "_segment"); NAME(s_custom, "custom_metadata"); NAME(s_end, "end_offset");
    NAME(s_start, "start_offset"); NAME(s_leader_epochs, "leader_epochs");
    NAME(s_keys, "keys"); NAME(s_ids, "ids"); NAME(s_highest, "highest");
    NAME(s_finished, "_finished"); NAME(s_unmapped, "_unmapped");
#undef NAME
    return 0;
}

/* RemoteLogSegmentState.isValidTransition for an update (never to STARTED: apply_row refuses
 * that before looking). */
static int valid_update(long old, long to)
{
    switch (old) {
    case STARTED: return to == FINISHED || to == DELETE_STARTED;
    case FINISHED: return to == FINISHED || to == DELETE_STARTED;
    case DELETE_STARTED: return to == DELETE_STARTED || to == DELETE_FINISHED;
    case DELETE_FINISHED: return to == DELETE_FINISHED;
    default: return 0;
    }
}

/* An int attribute of obj; -1 with an error set, or *ok = 0 when it is not an int. */
static int attr_long(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (*out == -1 && PyErr_Occurred()) return -1;
    return 0;
}

/* The partition state of (topic id, partition), borrowed, or NULL (no error) when there is none. */
static PyObject *partition_of(PyObject *partitions, PyObject *tid, PyObject *p)
{
    PyObject *key = PyTuple_Pack(2, tid, p);
    if (!key) return NULL;
    PyObject *state = PyDict_GetItemWithError(partitions, key);
    Py_DECREF(key);
    return state;
}

/* The finished copy's place in its one epoch's map, when it starts after every mapping there
 * (EpochState.finished's usual case): 1 done, 0 not the usual case, -1 error. */
static int append_mapping(PyObject *state, PyObject *sid, PyObject *epochs_tuple,
                          long long start, long long end)
{
    if (PyTuple_GET_SIZE(epochs_tuple) != 1) return 0;
    PyObject *pair = PyTuple_GET_ITEM(epochs_tuple, 0);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return 0;
    long long from = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1));
    if (from == -1 && PyErr_Occurred()) return -1;
    if (from < start) from = start;
    PyObject *epochs = PyObject_GetAttr(state, s_epochs);
    if (!epochs) return -1;
    int rc = 0;
    PyObject *es = PyDict_Check(epochs) ? PyDict_GetItemWithError(epochs, PyTuple_GET_ITEM(pair, 0)) : NULL;
    PyObject *keys = NULL, *ids = NULL, *highest = NULL, *fromobj = NULL, *endobj = NULL;
    if (!es) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (!(keys = PyObject_GetAttr(es, s_keys)) || !(ids = PyObject_GetAttr(es, s_ids)) ||
        !(highest = PyObject_GetAttr(es, s_highest))) {
        rc = -1;
        goto done;
    }
    if (!PyList_CheckExact(keys) || !PyList_CheckExact(ids)) goto done;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (n) {
        long long last = PyLong_AsLongLong(PyList_GET_ITEM(keys, n - 1));
        if (last == -1 && PyErr_Occurred()) { rc = -1; goto done; }
        if (last >= from) goto done;           /* displacement: EpochState.finished decides */
    }
    if (!(fromobj = PyLong_FromLongLong(from)) || PyList_Append(keys, fromobj) < 0 ||
        PyList_Append(ids, sid) < 0) {
        rc = -1;
        goto done;
    }
    if (highest == Py_None) {
        rc = 1;
    } else {
        long long h = PyLong_AsLongLong(highest);
        if (h == -1 && PyErr_Occurred()) { rc = -1; goto done; }
        rc = 1;
        if (end <= h) goto done;
    }
    if (!(endobj = PyLong_FromLongLong(end)) || PyObject_SetAttr(es, s_highest, endobj) < 0) rc = -1;
done:
    Py_DECREF(epochs);
    Py_XDECREF(keys);
    Py_XDECREF(ids);
    Py_XDECREF(highest);
    Py_XDECREF(fromobj);
    Py_XDECREF(endobj);
    return rc;
}

/* A segment record: 1 applied, 0 for apply_row, -1 error. */
static int segment_record(PyObject *row, PyObject *mpobj, PyObject *partitions, PyObject *copy_type)
{
    if (PyTuple_GET_SIZE(row) != 15) return 0;
    PyObject *st = PyTuple_GET_ITEM(row, 13);
    if (!PyLong_CheckExact(st) || PyLong_AsLong(st) != STARTED) {
        PyErr_Clear();        /* not a state this path takes: apply_row says what it is */
        return 0;
    }
    PyObject *tid = PyTuple_GET_ITEM(row, 2), *topic = PyTuple_GET_ITEM(row, 4), *sid = PyTuple_GET_ITEM(row, 5);
    if (!PyUnicode_CheckExact(tid) || !PyUnicode_CheckExact(topic) || !PyUnicode_CheckExact(sid)) return 0;
    PyObject *state = partition_of(partitions, tid, PyTuple_GET_ITEM(row, 3));
    if (!state) return PyErr_Occurred() ? -1 : 0;
    PyObject *copies = PyObject_GetAttr(state, s_copies);
    if (!copies) return -1;
    int rc = 0;
    PyObject *gen = NULL, *order = NULL, *copy = NULL;
    if (!PyDict_CheckExact(copies)) goto done;
    int seen = PyDict_Contains(copies, sid);
    if (seen != 0) { rc = seen < 0 ? -1 : 0; goto done; }   /* a repeat: add() decides */
    if (!(gen = PyObject_GetAttr(state, s_gen)) ||
        !(order = PyTuple_Pack(2, mpobj, PyTuple_GET_ITEM(row, 1)))) { rc = -1; goto done; }
    /* a million copies share their topic's strings (sys.intern, as apply_row) */
    Py_INCREF(topic);
    PyUnicode_InternInPlace(&topic);
    Py_INCREF(tid);
    PyUnicode_InternInPlace(&tid);
    /* CopyMeta's fields in order; its cached segment (the last) none yet */
    PyObject *args[16] = {sid, topic, tid, PyTuple_GET_ITEM(row, 3), PyTuple_GET_ITEM(row, 6),
                          PyTuple_GET_ITEM(row, 7), PyTuple_GET_ITEM(row, 9), PyTuple_GET_ITEM(row, 8),
                          PyTuple_GET_ITEM(row, 10), PyTuple_GET_ITEM(row, 11), PyTuple_GET_ITEM(row, 12),
                          st, order, PyTuple_GET_ITEM(row, 14), gen, Py_None};
    copy = PyObject_Vectorcall(copy_type, args, 16, NULL);
    Py_DECREF(topic);
    Py_DECREF(tid);
    if (!copy || PyDict_SetItem(copies, sid, copy) < 0 || PyObject_SetAttr(state, s_readable, Py_None) < 0) {
        rc = -1;
        goto done;
    }
    rc = 1;
done:
    Py_DECREF(copies);
    Py_XDECREF(gen);
    Py_XDECREF(order);
    Py_XDECREF(copy);
    return rc;
}

/* An update record: 1 applied, 0 for apply_row, -1 error. */
static int update_record(PyObject *row, PyObject *mpobj, PyObject *partitions)
{
    if (PyTuple_GET_SIZE(row) != 8) return 0;
    PyObject *sid = PyTuple_GET_ITEM(row, 4), *stobj = PyTuple_GET_ITEM(row, 5);
    PyObject *custom = PyTuple_GET_ITEM(row, 6), *endobj = PyTuple_GET_ITEM(row, 7);
    if (!PyUnicode_CheckExact(sid) || !PyLong_Check(stobj) || !PyLong_Check(endobj)) return 0;
    long to = PyLong_AsLong(stobj);
    long long new_end = PyLong_AsLongLong(endobj);
    if (PyErr_Occurred()) {   /* out of range: apply_row says what it is */
        PyErr_Clear();
        return 0;
    }
    if (to != FINISHED && to != DELETE_STARTED && to != DELETE_FINISHED) return 0;
    PyObject *state = partition_of(partitions, PyTuple_GET_ITEM(row, 2), PyTuple_GET_ITEM(row, 3));
    if (!state) return PyErr_Occurred() ? -1 : 0;
    PyObject *copies = PyObject_GetAttr(state, s_copies);
    if (!copies) return -1;
    int rc = -1;
    PyObject *copy = NULL, *order = NULL, *res = NULL, *lepochs = NULL;
    long long old, cgen, sgen, start, end;
    if (!PyDict_CheckExact(copies)) { rc = 0; goto done; }
    copy = PyDict_GetItemWithError(copies, sid);
    if (!copy) { rc = PyErr_Occurred() ? -1 : 0; goto done; }
    Py_INCREF(copy);
    if (attr_long(copy, s_state, &old) < 0 || attr_long(copy, s_gen, &cgen) < 0 ||
        attr_long(state, s_gen, &sgen) < 0) goto done;
    /* an illegal transition (logged there), or a shared copy to replace first (copy on write) */
    if (!valid_update((long)old, to) || cgen != sgen) { rc = 0; goto done; }
    if (!(order = PyTuple_Pack(2, mpobj, PyTuple_GET_ITEM(row, 1))) ||
        PyObject_SetAttr(state, s_readable, Py_None) < 0 || PyObject_SetAttr(copy, s_state, stobj) < 0 ||
        PyObject_SetAttr(copy, s_order, order) < 0 || PyObject_SetAttr(copy, s_segment, Py_None) < 0 ||
        (custom != Py_None && PyObject_SetAttr(copy, s_custom, custom) < 0) ||
        (new_end >= 0 && PyObject_SetAttr(copy, s_end, endobj) < 0)) goto done;
    if (to == FINISHED) {
        if (attr_long(copy, s_start, &start) < 0 || attr_long(copy, s_end, &end) < 0 ||
            !(lepochs = PyObject_GetAttr(copy, s_leader_epochs))) goto done;
        int got = PyTuple_Check(lepochs) ? append_mapping(state, sid, lepochs, start, end) : 0;
        if (got < 0) goto done;
        if (!got && !(res = PyObject_CallMethodOneArg(state, s_finished, copy))) goto done;
    } else if (to == DELETE_STARTED) {
        if (!(res = PyObject_CallMethodOneArg(state, s_unmapped, copy))) goto done;
    } else if (PyDict_DelItem(copies, sid) < 0) {
        goto done;
    }
    rc = 1;
done:
    Py_DECREF(copies);
    Py_XDECREF(copy);
    Py_XDECREF(order);
    Py_XDECREF(res);
    Py_XDECREF(lepochs);
    return rc;
}

static PyObject *rlm_apply(PyObject *self, PyObject *args)
{
    PyObject *rows, *mpobj, *partitions, *copy_type, *apply_row;
    if (!PyArg_ParseTuple(args, "O!O!O!OO:rlm_apply", &PyList_Type, &rows, &PyLong_Type, &mpobj,
                          &PyDict_Type, &partitions, &copy_type, &apply_row))
        return NULL;
    if (names_ready() < 0) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        int done = 0;
        if (PyTuple_CheckExact(row) && PyTuple_GET_SIZE(row) >= 4 && PyLong_CheckExact(PyTuple_GET_ITEM(row, 0))) {
            long kind = PyLong_AsLong(PyTuple_GET_ITEM(row, 0));
            if (kind == -1 && PyErr_Occurred()) PyErr_Clear();
            Py_INCREF(row);    /* the list is the caller's: keep the row while it is applied */
            if (kind == 0) done = segment_record(row, mpobj, partitions, copy_type);
            else if (kind == 1) done = update_record(row, mpobj, partitions);
            Py_DECREF(row);
            if (done < 0) return NULL;
        }
        if (!done) {
            PyObject *res = PyObject_CallFunctionObjArgs(apply_row, row, mpobj, NULL);
            if (!res) return NULL;
            Py_DECREF(res);
        }
    }
    Py_RETURN_NONE;
}

/* -- a partition's copies as a snapshot's columns (planning/remote_log_columns.py) -------------
 *
 * rlm_columns(copies, descrs, topic, topic_id, partition) -> (ints, leader_epochs, ids) | None:
 * the columns partition_to_doc makes of a list of CopyMeta, read slot by slot (descrs: the
 * class's member descriptors of segment_id, topic, topic_id, partition, start_offset,
 * end_offset, size_bytes, max_timestamp_ms, state, broker_epoch, order, txn_index_empty,
 * leader_epochs, custom_metadata): ints the INTS columns one after the other, leader_epochs the
 * flat (epoch, start) pairs, both little-endian int64; ids the segment ids joined.  None when any
 * copy is not the usual one (custom metadata, another topic name, an id that is not 22 ASCII
 * characters, an order that is not (metadata partition, offset), a value that is not an int64,
 * an unset slot, a big-endian machine): the caller's pure-Python path then makes the document
 * or names what is wrong.  A snapshot of a million copies is ~10 M values. */
enum { COL_SID, COL_TOPIC, COL_TID, COL_PART, COL_START, COL_END, COL_SIZE, COL_TS, COL_STATE, COL_BROKER,
       COL_ORDER, COL_EMPTY, COL_EPOCHS, COL_CUSTOM, NCOLS };
#define INT_COLS 10

static inline PyObject *slot(PyObject *obj, PyObject *descrs, int i)
{
    PyMemberDescrObject *d = (PyMemberDescrObject *)PyTuple_GET_ITEM(descrs, i);
    return *(PyObject **)((char *)obj + d->d_member->offset);
}

/* an exact int or bool as int64: 0 done, 1 not usual (no error set) */
static inline int as_i64(PyObject *v, long long *out)
{
    int overflow = 0;
    if (!v || !PyLong_Check(v)) return 1;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) { PyErr_Clear(); return 1; }
    return 0;
}

static PyObject *rlm_columns(PyObject *module, PyObject *args)
{
    PyObject *copies, *descrs, *topic, *tid, *part;
    if (!PyArg_ParseTuple(args, "O!O!UUO!:rlm_columns", &PyList_Type, &copies, &PyTuple_Type, &descrs, &topic,
                          &tid, &PyLong_Type, &part))
        return NULL;
#if PY_BIG_ENDIAN
    Py_RETURN_NONE;
#endif
    if (PyTuple_GET_SIZE(descrs) != NCOLS) {
        PyErr_SetString(PyExc_TypeError, "rlm_columns: 14 member descriptors");
        return NULL;
    }
    PyTypeObject *cls = NULL;
    for (int i = 0; i < NCOLS; i++) {
        PyObject *d = PyTuple_GET_ITEM(descrs, i);
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            PyErr_SetString(PyExc_TypeError, "rlm_columns: slots of one class");
            return NULL;
        }
        PyTypeObject *owner = PyDescr_TYPE(d);
        if (cls && owner != cls) {
            PyErr_SetString(PyExc_TypeError, "rlm_columns: slots of one class");
            return NULL;
        }
        cls = owner;
    }
    Py_ssize_t n = PyList_GET_SIZE(copies), pairs = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PyList_GET_ITEM(copies, i);
        if (Py_TYPE(c) != cls) Py_RETURN_NONE;
        PyObject *e = slot(c, descrs, COL_EPOCHS);
        if (!e || !PyTuple_CheckExact(e)) Py_RETURN_NONE;
        pairs += PyTuple_GET_SIZE(e);
    }
    PyObject *ints = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(long long) * INT_COLS * n);
    PyObject *flat = ints ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(long long) * 2 * pairs) : NULL;
    PyObject *ids = flat ? PyUnicode_New(22 * n, 127) : NULL;
    if (!ids) {
        Py_XDECREF(ints);
        Py_XDECREF(flat);
        return NULL;
    }
    long long *col = (long long *)PyBytes_AS_STRING(ints), *ep = (long long *)PyBytes_AS_STRING(flat);
    Py_UCS1 *idp = PyUnicode_1BYTE_DATA(ids);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PyList_GET_ITEM(copies, i);
        PyObject *sid = slot(c, descrs, COL_SID), *name = slot(c, descrs, COL_TOPIC);
        PyObject *ctid = slot(c, descrs, COL_TID), *cpart = slot(c, descrs, COL_PART);
        PyObject *order = slot(c, descrs, COL_ORDER), *custom = slot(c, descrs, COL_CUSTOM);
        PyObject *epochs = slot(c, descrs, COL_EPOCHS);
        if (!sid || !name || !ctid || !cpart || !order || custom != Py_None) goto usual_not;
        if (!PyUnicode_Check(sid) || !PyUnicode_IS_ASCII(sid) || PyUnicode_GET_LENGTH(sid) != 22) goto usual_not;
        if (name != topic && (!PyUnicode_Check(name) || PyUnicode_Compare(name, topic) != 0)) goto usual_not;
        if (ctid != tid && (!PyUnicode_Check(ctid) || PyUnicode_Compare(ctid, tid) != 0)) goto usual_not;
        if (PyErr_Occurred()) PyErr_Clear();
        if (!PyLong_Check(cpart) || PyObject_RichCompareBool(cpart, part, Py_EQ) != 1) goto usual_not;
        if (!PyTuple_CheckExact(order) || PyTuple_GET_SIZE(order) != 2) goto usual_not;
        static const int cols[] = {COL_START, COL_END, COL_SIZE, COL_TS, COL_STATE, COL_BROKER};
        long long v;
        for (int k = 0; k < 6; k++) {
            if (as_i64(slot(c, descrs, cols[k]), &v)) goto usual_not;
            col[k * n + i] = v;
        }
        if (as_i64(PyTuple_GET_ITEM(order, 0), &v)) goto usual_not;
        col[6 * n + i] = v;
        if (as_i64(PyTuple_GET_ITEM(order, 1), &v)) goto usual_not;
        col[7 * n + i] = v;
        if (as_i64(slot(c, descrs, COL_EMPTY), &v)) goto usual_not;
        col[8 * n + i] = v;
        Py_ssize_t k = PyTuple_GET_SIZE(epochs);
        col[9 * n + i] = k;
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *pair = PyTuple_GET_ITEM(epochs, j);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) goto usual_not;
            if (as_i64(PyTuple_GET_ITEM(pair, 0), &v)) goto usual_not;
            ep[at++] = v;
            if (as_i64(PyTuple_GET_ITEM(pair, 1), &v)) goto usual_not;
            ep[at++] = v;
        }
        memcpy(idp + 22 * i, PyUnicode_1BYTE_DATA(sid), 22);
    }
    return Py_BuildValue("(NNN)", ints, flat, ids);
usual_not:
    if (PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(ints);
    Py_DECREF(flat);
    Py_DECREF(ids);
    Py_RETURN_NONE;
}

static PyMethodDef replay_methods[] = {
    {"rlm_apply", rlm_apply, METH_VARARGS,
     "rlm_apply(rows, mp, partitions, copy_type, apply_row): the rows of metadata partition mp applied "
     "to RemoteLogState.partitions as apply_row(row, mp) applies each, the usual changes in C"},
    {"rlm_columns", rlm_columns, METH_VARARGS,
     "rlm_columns(copies, descrs, topic, topic_id, partition) -> (ints, leader_epochs, ids) | None: "
     "a partition's copies as a snapshot's columns (None: not the usual copies)"},
    {NULL}};

int kt_rlm_replay_register(PyObject *module) { return PyModule_AddFunctions(module, replay_methods); }

/* -- makers: instances of a slotted dataclass made from positional values, slot by slot --------
 *
 * A plan of a million copies makes a million RemoteSegments, RemoteRanges and copies; a frozen
 * dataclass's __init__ sets each field through object.__setattr__ (~2-6 us an instance here).
 * slots_maker(cls, names) returns a function that allocates cls and stores one value in each
 * named slot, in order, as __init__ would with every field given: for dataclasses without
 * __post_init__ or converters only (the caller's to choose; records/backend.py's maker). */
static PyObject *slots_make(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(self, 0);
    Py_ssize_t n = PyTuple_GET_SIZE(self) - 1;
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd values, got %zd", cls->tp_name, n, nargs);
        return NULL;
    }
    PyObject *obj = cls->tp_alloc(cls, 0);
    if (!obj) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyMemberDescrObject *d = (PyMemberDescrObject *)PyTuple_GET_ITEM(self, i + 1);
        if (PyMember_SetOne((char *)obj, d->d_member, args[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

static PyMethodDef make_def = {"make", (PyCFunction)(void (*)(void))slots_make, METH_FASTCALL,
                               "make(*values): an instance with each slot set, in order"};

static PyObject *slots_maker(PyObject *module, PyObject *args)
{
    PyObject *cls, *names;
    if (!PyArg_ParseTuple(args, "O!O!:slots_maker", &PyType_Type, &cls, &PyTuple_Type, &names)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    PyObject *bound = PyTuple_New(n + 1);
    if (!bound) return NULL;
    Py_INCREF(cls);
    PyTuple_SET_ITEM(bound, 0, cls);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttr(cls, PyTuple_GET_ITEM(names, i));
        if (!d) goto fail;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX ||
            ((PyMemberDescrObject *)d)->d_member->flags & READONLY) {
            PyErr_Format(PyExc_TypeError, "%R is not a writable slot of %R", PyTuple_GET_ITEM(names, i), cls);
            Py_DECREF(d);
            goto fail;
        }
        PyTuple_SET_ITEM(bound, i + 1, d);
    }
    PyObject *fn = PyCFunction_NewEx(&make_def, bound, NULL);
    Py_DECREF(bound);
    return fn;
fail:
    Py_DECREF(bound);
    return NULL;
}

static PyMethodDef maker_methods[] = {
    {"slots_maker", slots_maker, METH_VARARGS,
     "slots_maker(cls, names) -> make(*values): instances of a slotted class, each named slot set in order"},
    {NULL}};

int kt_slots_register(PyObject *module) { return PyModule_AddFunctions(module, maker_methods); }
