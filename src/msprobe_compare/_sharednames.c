/* The C layer the stages share: lists of names and texts (one module, used by load, pair and render through their
 * Python twins' bindings; docs/design.md says which stage calls which function).
 *
 * Joins and codes (pair/exact.py, pair/calls.py, load/rows.py):
 *
 * first_index(names, keys, out): out[i] = min{j : names[j] == keys[i]} or -1 (out: int64 buffer of len(keys));
 * returns how many names repeat an earlier one, or None (out undefined) when a text has no UTF-8 form.
 * An open-addressing table over the names' UTF-8 bytes; equal str objects have equal UTF-8 bytes and the
 * other way round, so the result is the dict-based join's (tests/pair/test_exact.py compares both). The names
 * are hashed a batch ahead and their slots prefetched (a million names' table is far beyond the cache); a key
 * is first compared with the row after the previous key's match (the two dumps mostly list the same rows in
 * the same order), which is its answer when that row is the first of its text, and looked up otherwise.
 *
 * Names and trees (load/dumpjson.py: construct.json; pair/calls.py; load/rows.py):
 * tree_beside(raw, base) -> (tree, moved, fresh) or None
 *     a construct.json's bytes read beside `base`, the other side's tree (dict): one object of plain strings (no
 *     escape, no control character, valid UTF-8) to plain strings or null, whitespace around; anything else gives
 *     None, for orjson to read or report, as does a name given twice. `tree` is a copy of base less the names
 *     this file lacks or gives another parent, then those of this file (in its order), so its parents and the
 *     names of both are base's objects; `moved`, the names of both whose parents differ (list); `fresh`, whether
 *     some name is not in base. Names are walked in base's order (a hash lookup only off it).
 * children(tree, modules) -> [(name, parent), ...]
 *     the items of a construct.json tree (dict) whose parent is in the set `modules`, in the tree's order.
 * call_keys(names) -> [key, ...] or None
 *     pair.calls.call_keys' substitutions name by name (None when a name holds a line break: the caller's own rule).
 * module_scan(entries, names, bounds, prefixes, tree) -> (calls, parent calls, flags) or None
 *     pair/align.py's module calls in one pass over a side's entries (its Python twin, _py_module_scan, says what
 *     each item holds); None when a text has no UTF-8 form. The tree's items are walked beside the entries, looked
 *     up only where the orders part; an entry with the previous entry's parent takes its answers.
 * rows_alike(names_n, bounds_n, entries_n, shape_n, names_b, bounds_b, entries_b, shape_b, e_n, e_b) -> codes
 * keyed_rows(names, bounds, entries, e, keys) -> rows
 *     rows of entries by their keys (a row's name less its entry's name and a dot): per entry pair whether their
 *     rows hold the same keys (and shapes) in the same order; per (entry, key) its first row (pair/aligned.py's
 *     Python twins say the same in Python).
 * phase_flags(entries, backward, grad, ends, inplace)
 *     per name: "backward" in it, "parameters_grad" in it, it ends with ".backward", a call of an in-place API
 *     (`add_.3.forward`: "_." in it and its API part ends with one "_"); load/rows.name_flags' string tests in one
 *     pass; bool buffers of len(entries).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint32_t tag;  /* the hash's high half */
    uint32_t row1; /* the name's row + 1; 0: empty (a calloc'ed table needs no pass to mark its slots empty) */
} Slot;

static Py_hash_t (*seeded_hash)(const void *, Py_ssize_t); /* PyHash_GetFuncDef()->hash, set at import */

/* The hash of a name's UTF-8 bytes: CPython's string hash (PEP 456: SipHash keyed per process, as a dict's), so no
 * choice of names from a dump collides more than chance makes them (a fixed hash can be inverted: 64,000 names of one
 * hash made a join quadratic). */
static uint64_t hash_bytes(const char *s, Py_ssize_t n) { return (uint64_t)seeded_hash(s, n); }

static int utf8_of(PyObject *list, Py_ssize_t i, const char **s, Py_ssize_t *n) {
    PyObject *item = PyList_GET_ITEM(list, i);
    if (!PyUnicode_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "first_index: names and keys must be str");
        return -1;
    }
    *s = PyUnicode_AsUTF8AndSize(item, n);
    return *s ? 0 : -1;
}

static int same_text(PyObject *a, PyObject *b, int *equal) {
    if (a == b) {
        *equal = 1;
        return 0;
    }
    if (!PyUnicode_Check(a) || !PyUnicode_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "first_index: names and keys must be str");
        return -1;
    }
    Py_ssize_t la, lb;
    const char *sa = PyUnicode_AsUTF8AndSize(a, &la);
    if (!sa) return -1;
    const char *sb = PyUnicode_AsUTF8AndSize(b, &lb);
    if (!sb) return -1;
    *equal = la == lb && memcmp(sa, sb, (size_t)la) == 0;
    return 0;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_W(p) __builtin_prefetch((p), 1)
#else
#define PREFETCH_W(p) ((void)(p))
#endif
#define BATCH 16 /* names hashed ahead of their insertion, their slots prefetched: the table is far beyond the cache */

/* The open-addressing table over the names' UTF-8 bytes: each text's first row; first[j] (when given): names[j] is
 * the first row of its text. Returns the table (PyMem) and sets *mask and *repeated, or NULL with an exception. */
static Slot *build_table(PyObject *names, unsigned char *first, size_t *mask_out, Py_ssize_t *repeated_out) {
    Py_ssize_t n = PyList_GET_SIZE(names);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    Slot *table = PyMem_Calloc(cap, sizeof(Slot));
    if (!table) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t mask = cap - 1;
    Py_ssize_t repeated = 0;
    uint64_t hashes[BATCH];
    for (Py_ssize_t j0 = 0; j0 < n; j0 += BATCH) {
        Py_ssize_t count = n - j0 < BATCH ? n - j0 : BATCH;
        for (Py_ssize_t b = 0; b < count; b++) {
            const char *s;
            Py_ssize_t len;
            if (utf8_of(names, j0 + b, &s, &len) < 0) goto fail;
            hashes[b] = hash_bytes(s, len);
            PREFETCH_W(&table[(size_t)hashes[b] & mask]);
        }
        for (Py_ssize_t b = 0; b < count; b++) {
            Py_ssize_t j = j0 + b;
            uint64_t h = hashes[b];
            uint32_t tag = (uint32_t)(h >> 32);
            if (first) first[j] = 1;
            for (size_t k = (size_t)h & mask;; k = (k + 1) & mask) {
                if (!table[k].row1) {
                    table[k].tag = tag;
                    table[k].row1 = (uint32_t)j + 1;
                    break;
                }
                if (table[k].tag == tag) {
                    int equal;
                    if (same_text(PyList_GET_ITEM(names, j), PyList_GET_ITEM(names, table[k].row1 - 1), &equal) < 0)
                        goto fail;
                    if (equal) { /* a later row: the first one stays */
                        repeated++;
                        if (first) first[j] = 0;
                        break;
                    }
                }
            }
        }
    }
    *mask_out = mask;
    *repeated_out = repeated;
    return table;
fail:
    PyMem_Free(table);
    return NULL;
}

/* The first row of the text s (len bytes) in the table over `names`, -1: none; -2: an error is set. */
static Py_ssize_t find_text(const Slot *table, size_t mask, PyObject *names, const char *s, Py_ssize_t len) {
    uint64_t h = hash_bytes(s, len);
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t k = (size_t)h & mask; table[k].row1; k = (k + 1) & mask) {
        if (table[k].tag != tag) continue;
        const char *t;
        Py_ssize_t tl;
        Py_ssize_t j = (Py_ssize_t)table[k].row1 - 1;
        if (utf8_of(names, j, &t, &tl) < 0) return -2;
        if (tl == len && memcmp(s, t, (size_t)len) == 0) return j;
    }
    return -1;
}

static PyObject *first_index(PyObject *self, PyObject *args) {
    PyObject *names, *keys;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!O!w*", &PyList_Type, &names, &PyList_Type, &keys, &out)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(names), m = PyList_GET_SIZE(keys);
    PyObject *result = NULL;
    Slot *table = NULL;
    unsigned char *first = NULL; /* first[j]: names[j] is the first row of its text */
    if (out.len != m * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "first_index: out must be an int64 buffer of len(keys)");
        goto done;
    }
    if ((uint64_t)n >= UINT32_MAX) { /* rows beyond a slot's 32 bits: the caller's dict join */
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    first = PyMem_Malloc((size_t)n + 1);
    if (!first) {
        PyErr_NoMemory();
        goto done;
    }
    size_t mask;
    Py_ssize_t repeated;
    table = build_table(names, first, &mask, &repeated);
    if (!table) goto done;
    int64_t *dst = (int64_t *)out.buf;
    Py_ssize_t guess = 0; /* the row after the previous key's match: keys mostly follow the names' order */
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (guess < n && first[guess]) { /* the first row of its text, equal to the key: the key's first row */
            int equal;
            if (same_text(key, PyList_GET_ITEM(names, guess), &equal) < 0) goto done;
            if (equal) {
                dst[i] = guess++;
                continue;
            }
        }
        const char *s;
        Py_ssize_t len;
        if (utf8_of(keys, i, &s, &len) < 0) goto done;
        Py_ssize_t j = find_text(table, mask, names, s, len);
        if (j == -2) goto done;
        dst[i] = j;
        if (j >= 0) guess = j + 1;
    }
    result = PyLong_FromSsize_t(repeated);
done:
    if (!result && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) { /* lone surrogates: the caller's dict join */
        PyErr_Clear();
        Py_INCREF(Py_None);
        result = Py_None;
    }
    PyMem_Free(table);
    PyMem_Free(first);
    PyBuffer_Release(&out);
    return result;
}

/* NameIndex(names): first_index's table kept, for many lookups into one list of texts (held, not copied: the list
 * must not change meanwhile; a changed length is an error). find(keys, out): out[i] = the first position of keys[i]
 * or -1 (int64 buffer of len(keys)); get(text) -> position or -1 (a key that is not a text, or has no UTF-8 form, is
 * none of the names); len(); repeated: how many names repeat an earlier one. Names without a UTF-8 form:
 * UnicodeEncodeError from the constructor (the caller takes its dict). */
typedef struct {
    PyObject_HEAD
    PyObject *names; /* the list the table's rows point into (it must not change: its length is checked) */
    Slot *table;
    size_t mask;
    unsigned char *first; /* first[j]: names[j] is the first position of its text */
    Py_ssize_t size;  /* len(names) when indexed */
    Py_ssize_t guess; /* the position after the last one found: keys mostly follow the names' order */
    Py_ssize_t repeated; /* names equal to an earlier one */
} NameIndex;

static int NameIndex_traverse(NameIndex *self, visitproc visit, void *arg) {
    Py_VISIT(self->names);
    return 0;
}

static int NameIndex_clear(NameIndex *self) {
    Py_CLEAR(self->names); /* the table stays until dealloc; ready() refuses an index without its list */
    return 0;
}

static void NameIndex_dealloc(NameIndex *self) {
    PyObject_GC_UnTrack(self);
    PyMem_Free(self->table);
    PyMem_Free(self->first);
    Py_XDECREF(self->names);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int NameIndex_init(NameIndex *self, PyObject *args, PyObject *kwds) {
    PyObject *names;
    if (!PyArg_ParseTuple(args, "O!:NameIndex", &PyList_Type, &names)) return -1;
    if ((uint64_t)PyList_GET_SIZE(names) >= UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "NameIndex: too many names");
        return -1;
    }
    Py_ssize_t repeated;
    size_t mask;
    unsigned char *first = PyMem_Malloc((size_t)PyList_GET_SIZE(names) + 1);
    if (!first) {
        PyErr_NoMemory();
        return -1;
    }
    Slot *table = build_table(names, first, &mask, &repeated);
    if (!table) {
        PyMem_Free(first);
        return -1;
    }
    PyMem_Free(self->table);
    PyMem_Free(self->first);
    self->first = first;
    self->repeated = repeated;
    self->table = table;
    self->mask = mask;
    self->size = PyList_GET_SIZE(names);
    self->guess = 0;
    Py_INCREF(names);
    Py_XSETREF(self->names, names); /* last: dropping the old list may run code that uses this index */
    return 0;
}

static int ready(NameIndex *self) {
    if (!self->table || !self->names) {
        PyErr_SetString(PyExc_ValueError, "NameIndex: not initialised");
        return -1;
    }
    if (PyList_GET_SIZE(self->names) != self->size) {
        PyErr_SetString(PyExc_RuntimeError, "NameIndex: the indexed list changed");
        return -1;
    }
    return 0;
}

static Py_ssize_t index_of_bytes(NameIndex *self, const char *s, Py_ssize_t len);
static PyObject *none_on_encode_error(PyObject *result);
static int sized(Py_buffer *b, Py_ssize_t itemsize, Py_ssize_t items, const char *what);

static Py_ssize_t index_of(NameIndex *self, PyObject *key) {
    if (!PyUnicode_Check(key)) return -1; /* not a text: none of the names */
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(key, &len);
    if (!s) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -2;
        PyErr_Clear(); /* no UTF-8 form: none of the names, which all have one */
        return -1;
    }
    return index_of_bytes(self, s, len);
}

/* The first position of the text of UTF-8 bytes s[0:len], -1: none, -2: an error is set. */
static Py_ssize_t index_of_bytes(NameIndex *self, const char *s, Py_ssize_t len) {
    Py_ssize_t g = self->guess;
    if (g < self->size && self->first[g]) { /* the next name, the first of its text: the answer when equal */
        const char *t;
        Py_ssize_t tl;
        if (utf8_of(self->names, g, &t, &tl) < 0) return -2;
        if (tl == len && memcmp(s, t, (size_t)len) == 0) {
            self->guess = g + 1;
            return g;
        }
    }
    Py_ssize_t j = find_text(self->table, self->mask, self->names, s, len);
    if (j >= 0) self->guess = j + 1;
    return j;
}

static PyObject *NameIndex_find(NameIndex *self, PyObject *args) {
    PyObject *keys;
    Py_buffer out;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "O!w*", &PyList_Type, &keys, &out)) return NULL;
    Py_ssize_t m = PyList_GET_SIZE(keys);
    PyObject *result = NULL;
    if (out.len != m * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "NameIndex.find: out must be an int64 buffer of len(keys)");
        goto done;
    }
    int64_t *dst = (int64_t *)out.buf;
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t j = index_of(self, PyList_GET_ITEM(keys, i));
        if (j == -2) goto done;
        dst[i] = j;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&out);
    return result;
}

/* find_at(texts, positions, cut, tail, out): out[i] = the first position of texts[positions[i]] less its last `cut`
 * characters, then `tail` (`X.3.forward` -> `X.3.backward`: cut 7, tail "backward"); True, or None (out undefined)
 * when a text's last `cut` characters are not ASCII or a text has no UTF-8 form: the caller's Python twin. */
static PyObject *NameIndex_find_at(NameIndex *self, PyObject *args) {
    PyObject *texts, *tail;
    Py_buffer pos, out;
    Py_ssize_t cut;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "O!y*nUw*", &PyList_Type, &texts, &pos, &cut, &tail, &out))
        return NULL;
    Py_ssize_t m = pos.len / 8, nt = PyList_GET_SIZE(texts), tl, cap = 0;
    PyObject *result = NULL;
    char *buf = NULL;
    const char *t = PyUnicode_AsUTF8AndSize(tail, &tl);
    if (!t) goto done;
    if (cut < 0 || sized(&pos, 8, m, "find_at: positions") < 0 || sized(&out, 8, m, "find_at: out") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "find_at: cut must be >= 0");
        goto done;
    }
    const int64_t *at = pos.buf;
    int64_t *dst = out.buf;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (at[i] < 0 || at[i] >= nt) {
            PyErr_SetString(PyExc_IndexError, "find_at: a position outside the texts");
            goto done;
        }
        PyObject *text = PyList_GET_ITEM(texts, (Py_ssize_t)at[i]);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "find_at: texts must be str");
            goto done;
        }
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(text, &len);
        if (!s) goto done;
        Py_ssize_t keep = len > cut ? len - cut : 0;
        for (Py_ssize_t k = keep; k < len; k++)
            if ((unsigned char)s[k] >= 0x80) { /* the cut characters are not bytes: Python's slice decides */
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
        if (keep + tl > cap) {
            cap = (keep + tl) * 2 + 64;
            char *grown = PyMem_Realloc(buf, (size_t)cap);
            if (!grown) {
                PyErr_NoMemory();
                goto done;
            }
            buf = grown;
        }
        memcpy(buf, s, (size_t)keep);
        memcpy(buf + keep, t, (size_t)tl);
        Py_ssize_t j = index_of_bytes(self, buf, keep + tl);
        if (j == -2) goto done;
        dst[i] = j;
    }
    result = Py_True;
    Py_INCREF(result);
done:
    result = none_on_encode_error(result);
    PyMem_Free(buf);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *NameIndex_get(NameIndex *self, PyObject *key) {
    if (ready(self) < 0) return NULL;
    Py_ssize_t j = index_of(self, key);
    return j == -2 ? NULL : PyLong_FromSsize_t(j);
}

static Py_ssize_t NameIndex_len(NameIndex *self) { return self->names ? PyList_GET_SIZE(self->names) : 0; }

static PyObject *NameIndex_repeated(NameIndex *self, void *closure) { return PyLong_FromSsize_t(self->repeated); }

static PyGetSetDef NameIndex_getset[] = {
    {"repeated", (getter)NameIndex_repeated, NULL, "how many names repeat an earlier one", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef NameIndex_methods[] = {
    {"find", (PyCFunction)NameIndex_find, METH_VARARGS, "find(keys, out): out[i] = first position of keys[i], -1: none"},
    {"get", (PyCFunction)NameIndex_get, METH_O, "get(text) -> its first position, -1: none"},
    {"find_at", (PyCFunction)NameIndex_find_at, METH_VARARGS,
     "find_at(texts, positions, cut, tail, out): out[i] = first position of texts[positions[i]][:-cut] + tail, "
     "-1: none; True, or None when Python's slice must decide"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods NameIndex_sequence = {.sq_length = (lenfunc)NameIndex_len};

static PyTypeObject NameIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "msprobe_compare._sharednames.NameIndex",
    .tp_basicsize = sizeof(NameIndex),
    .tp_dealloc = (destructor)NameIndex_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)NameIndex_traverse,
    .tp_clear = (inquiry)NameIndex_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "NameIndex(names): the first position of each text of a list, for many lookups",
    .tp_methods = NameIndex_methods,
    .tp_getset = NameIndex_getset,
    .tp_as_sequence = &NameIndex_sequence,
    .tp_init = (initproc)NameIndex_init,
    .tp_new = PyType_GenericNew,
};

/* code_objects(items) -> (codes int32 bytes, distinct objects): by identity, in order of first appearance. */
static PyObject *code_objects(PyObject *self, PyObject *args) {
    PyObject *items;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &items)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    size_t cap = 64;
    while (cap < 64 || cap < (size_t)n / 4) cap <<= 1;
    PyObject **keys = NULL;
    int32_t *slot_code = NULL;
    PyObject *codes = PyBytes_FromStringAndSize(NULL, n * 4), *table = PyList_New(0), *result = NULL;
    if (!codes || !table) goto done;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(codes);
    keys = PyMem_Calloc(cap, sizeof(PyObject *));
    slot_code = PyMem_Malloc(cap * sizeof(int32_t));
    if (!keys || !slot_code) {
        PyErr_NoMemory();
        goto done;
    }
    size_t used = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(items, i);
        size_t mask = cap - 1, k = ((uintptr_t)x >> 4) * 0x9E3779B97F4A7C15ull >> 20 & mask;
        while (keys[k] && keys[k] != x) k = (k + 1) & mask;
        if (!keys[k]) {
            if (PyList_GET_SIZE(table) >= INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "code_objects: too many distinct objects");
                goto done;
            }
            keys[k] = x;
            slot_code[k] = (int32_t)PyList_GET_SIZE(table);
            if (PyList_Append(table, x) < 0) goto done;
            if (++used * 2 > cap) { /* grow: rehash */
                size_t ncap = cap * 2;
                PyObject **nkeys = PyMem_Calloc(ncap, sizeof(PyObject *));
                int32_t *ncode = PyMem_Malloc(ncap * sizeof(int32_t));
                if (!nkeys || !ncode) {
                    PyMem_Free(nkeys);
                    PyMem_Free(ncode);
                    PyErr_NoMemory();
                    goto done;
                }
                for (size_t j = 0; j < cap; j++) {
                    if (!keys[j]) continue;
                    size_t q = ((uintptr_t)keys[j] >> 4) * 0x9E3779B97F4A7C15ull >> 20 & (ncap - 1);
                    while (nkeys[q]) q = (q + 1) & (ncap - 1);
                    nkeys[q] = keys[j];
                    ncode[q] = slot_code[j];
                }
                PyMem_Free(keys);
                PyMem_Free(slot_code);
                keys = nkeys;
                slot_code = ncode;
                cap = ncap;
                mask = cap - 1;
                k = ((uintptr_t)x >> 4) * 0x9E3779B97F4A7C15ull >> 20 & mask;
                while (keys[k] != x) k = (k + 1) & mask;
            }
        }
        out[i] = slot_code[k];
    }
    result = PyTuple_Pack(2, codes, table);
done:
    PyMem_Free(keys);
    PyMem_Free(slot_code);
    Py_XDECREF(codes);
    Py_XDECREF(table);
    return result;
}

/* stem_counts(entries) -> {stem: count} of the entries ending with `.forward` or `.backward`, the stem being
 * `entry.rsplit(".", 2)[0]` (the entry less its call index and direction), in order of first appearance; None when
 * an entry has no UTF-8 form. The stems are counted by their UTF-8 bytes (a `.` byte is a `.` character there),
 * each distinct stem made a str once. */
typedef struct {
    uint64_t hash;
    Py_ssize_t entry; /* an entry with this stem; -1: empty */
    Py_ssize_t len;   /* the stem's bytes */
    Py_ssize_t count;
    Py_ssize_t order; /* its place among the distinct stems */
} StemSlot;

static const char *stem_of(const char *s, Py_ssize_t n, Py_ssize_t *len) {
    Py_ssize_t dot;
    if (n >= 8 && memcmp(s + n - 8, ".forward", 8) == 0) dot = n - 8;
    else if (n >= 9 && memcmp(s + n - 9, ".backward", 9) == 0) dot = n - 9;
    else return NULL;
    Py_ssize_t k = dot - 1;
    while (k >= 0 && s[k] != '.') k--;
    *len = k >= 0 ? k : dot;
    return s;
}

/* `result`, or None in its place when it is NULL because a text had no UTF-8 form (the exception cleared): the
 * caller then takes its Python path. */
static PyObject *none_on_encode_error(PyObject *result) {
    if (!result && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
        Py_INCREF(Py_None);
        return Py_None;
    }
    return result;
}

static PyObject *stem_counts(PyObject *self, PyObject *args) {
    PyObject *entries;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &entries)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries), used = 0;
    size_t cap = 256;
    StemSlot *table = PyMem_Malloc(cap * sizeof(StemSlot));
    Py_ssize_t *order = PyMem_Malloc((cap / 2 + 1) * sizeof(Py_ssize_t)); /* slot of each distinct stem */
    PyObject *result = NULL;
    if (!table || !order) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < cap; k++) table[k].entry = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s;
        Py_ssize_t len, stem;
        if (utf8_of(entries, i, &s, &len) < 0) goto done;
        if (!stem_of(s, len, &stem)) continue;
        uint64_t h = hash_bytes(s, stem);
        size_t k = (size_t)h & (cap - 1);
        for (;; k = (k + 1) & (cap - 1)) {
            if (table[k].entry < 0) break;
            if (table[k].hash == h && table[k].len == stem) {
                const char *t;
                Py_ssize_t tl;
                if (utf8_of(entries, table[k].entry, &t, &tl) < 0) goto done;
                if (memcmp(s, t, (size_t)stem) == 0) break;
            }
        }
        if (table[k].entry >= 0) {
            table[k].count++;
            continue;
        }
        table[k] = (StemSlot){h, i, stem, 1, used};
        order[used++] = (Py_ssize_t)k;
        if ((size_t)used * 2 > cap) { /* grow: rehash */
            size_t ncap = cap * 2;
            StemSlot *grown = PyMem_Malloc(ncap * sizeof(StemSlot));
            Py_ssize_t *norder = PyMem_Malloc((ncap / 2 + 1) * sizeof(Py_ssize_t));
            if (!grown || !norder) {
                PyMem_Free(grown);
                PyMem_Free(norder);
                PyErr_NoMemory();
                goto done;
            }
            for (size_t q = 0; q < ncap; q++) grown[q].entry = -1;
            for (Py_ssize_t o = 0; o < used; o++) {
                StemSlot slot = table[order[o]];
                size_t q = (size_t)slot.hash & (ncap - 1);
                while (grown[q].entry >= 0) q = (q + 1) & (ncap - 1);
                grown[q] = slot;
                norder[o] = (Py_ssize_t)q;
            }
            PyMem_Free(table);
            PyMem_Free(order);
            table = grown;
            order = norder;
            cap = ncap;
        }
    }
    PyObject *counts = PyDict_New();
    if (!counts) goto done;
    for (Py_ssize_t o = 0; o < used; o++) {
        StemSlot *slot = &table[order[o]];
        const char *s;
        Py_ssize_t len;
        if (utf8_of(entries, slot->entry, &s, &len) < 0) {
            Py_DECREF(counts);
            goto done;
        }
        PyObject *key = PyUnicode_DecodeUTF8(s, slot->len, "strict"), *value = PyLong_FromSsize_t(slot->count);
        int failed = !key || !value || PyDict_SetItem(counts, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (failed) {
            Py_DECREF(counts);
            goto done;
        }
    }
    result = counts;
done:
    result = none_on_encode_error(result); /* lone surrogates: the caller's Counter */
    PyMem_Free(table);
    PyMem_Free(order);
    return result;
}

/* containing(texts, needle) -> int64 positions (as bytes) of the texts that contain `needle`, or None when a text
 * has no UTF-8 form (a substring of UTF-8 bytes that is itself whole characters is a substring of the text). */
static PyObject *containing(PyObject *self, PyObject *args) {
    PyObject *texts;
    const char *needle;
    Py_ssize_t nlen;
    if (!PyArg_ParseTuple(args, "O!s#", &PyList_Type, &texts, &needle, &nlen)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(texts), found = 0, cap = 64;
    int64_t *pos = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    PyObject *result = NULL;
    if (!pos) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s;
        Py_ssize_t len;
        if (utf8_of(texts, i, &s, &len) < 0) goto done;
        int hit = nlen == 0;
        if (len >= nlen && nlen > 0) {
            for (const char *at = s, *end = s + (len - nlen); at <= end; at++) { /* end: the last start */
                at = memchr(at, needle[0], (size_t)(end - at) + 1);
                if (!at || (hit = memcmp(at, needle, (size_t)nlen) == 0)) break;
            }
        }
        if (!hit) continue;
        if (found == cap) {
            int64_t *grown = PyMem_Realloc(pos, (size_t)cap * 2 * sizeof(int64_t));
            if (!grown) {
                PyErr_NoMemory();
                goto done;
            }
            pos = grown;
            cap *= 2;
        }
        pos[found++] = i;
    }
    result = PyBytes_FromStringAndSize((const char *)pos, found * (Py_ssize_t)sizeof(int64_t));
done:
    result = none_on_encode_error(result); /* lone surrogates: the caller's search */
    PyMem_Free(pos);
    return result;
}

/* Names and trees: construct.json's parents (load), call keys and children (pair), name flags (load). */

static int sized(Py_buffer *b, Py_ssize_t itemsize, Py_ssize_t items, const char *what) {
    if (b->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes where %zd were expected", what, b->len, items * itemsize);
        return -1;
    }
    return 0;
}

static PyObject *children(PyObject *self, PyObject *args) {
    PyObject *tree, *modules;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &tree, &modules)) return NULL;
    if (!PyAnySet_Check(modules)) {
        PyErr_SetString(PyExc_TypeError, "children: modules must be a set");
        return NULL;
    }
    PyObject *out = PyList_New(0), *key, *value;
    if (!out) return NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(tree, &pos, &key, &value)) {
        int in = PySet_Contains(modules, value);
        if (in < 0) goto fail;
        if (!in) continue;
        PyObject *item = PyTuple_Pack(2, key, value);
        if (!item || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* tree_beside's JSON subset: whitespace */
static inline const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* a string without escapes or control characters at p (its opening quote): its bytes [*s, *s + *n), the
 * position after its closing quote; NULL for anything else */
static inline const char *plain_string(const char *p, const char *end, const char **s, Py_ssize_t *n) {
    if (p >= end || *p != '"') return NULL;
    const char *q = ++p;
    while (q < end && *q != '"') {
        if (*q == '\\' || (unsigned char)*q < 0x20) return NULL;
        q++;
    }
    if (q >= end) return NULL;
    *s = p;
    *n = q - p;
    return q + 1;
}

/* a text's UTF-8 bytes (ASCII texts: their own data, no copy); NULL without a UTF-8 form (error cleared) */
static inline const char *text_utf8(PyObject *text, Py_ssize_t *n) {
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *n = PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    const char *s = PyUnicode_AsUTF8AndSize(text, n);
    if (!s) PyErr_Clear();
    return s;
}

static inline int same_utf8(PyObject *text, const char *s, Py_ssize_t n) {
    Py_ssize_t m;
    const char *t = PyUnicode_Check(text) ? text_utf8(text, &m) : NULL;
    return t && m == n && memcmp(t, s, (size_t)n) == 0;
}

#define TREE_LOOKAHEAD 64 /* base items skipped to find the next name in order (the other side's extra calls) */

static PyObject *tree_beside(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *base;
    if (!PyArg_ParseTuple(args, "y*O!", &raw, &PyDict_Type, &base)) return NULL;
    PyObject *changes = PyList_New(0), *moved = PyList_New(0), *tree = NULL, *result = NULL, *k, *v;
    PyObject *last_value = NULL; /* the parent made for the previous change: the next item's, often (owned) */
    unsigned char *seen = NULL; /* per base item (PyDict_Next position): named here with the same parent */
    Py_ssize_t slots = 0, members = 0, at = 0, kept = 0; /* at: base's next item in order; kept: items seen */
    int fresh = 0; /* a name base does not hold */
    if (!changes || !moved) goto done;
    for (Py_ssize_t pos = 0; PyDict_Next(base, &pos, &k, &v);) slots = pos;
    seen = PyMem_Calloc((size_t)slots + 1, 1);
    if (!seen) {
        PyErr_NoMemory();
        goto done;
    }
    const char *p = raw.buf, *end = p + raw.len;
    p = skip_ws(p, end);
    if (p >= end || *p++ != '{') goto subset;
    p = skip_ws(p, end);
    if (p < end && *p == '}') {
        p++;
        goto tail;
    }
    for (;;) {
        const char *ks, *vs = NULL;
        Py_ssize_t kn, vn = 0;
        p = plain_string(p, end, &ks, &kn);
        if (!p) goto subset;
        p = skip_ws(p, end);
        if (p >= end || *p++ != ':') goto subset;
        p = skip_ws(p, end);
        if (p < end && *p == '"') {
            p = plain_string(p, end, &vs, &vn);
            if (!p) goto subset;
        } else if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
            p += 4;
        } else {
            goto subset; /* a list, a number, ...: not this subset */
        }
        members++;
        /* the name in base's order: its next item or one a few further on */
        PyObject *key = NULL, *old = NULL;
        Py_ssize_t probe = at;
        for (int step = 0; step < TREE_LOOKAHEAD && PyDict_Next(base, &probe, &k, &v); step++) {
            if (PyUnicode_Check(k) && same_utf8(k, ks, kn)) {
                key = k;
                Py_INCREF(key);
                old = v;
                at = probe;
                break;
            }
        }
        int in_order = key != NULL;
        if (!in_order) { /* out of order or not in base: by hash */
            key = PyUnicode_DecodeUTF8(ks, kn, "strict");
            if (!key) goto not_utf8;
            old = PyDict_GetItemWithError(base, key); /* borrowed */
            if (!old && PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
        }
        int same = old == Py_None ? vs == NULL : (old && vs && same_utf8(old, vs, vn));
        if (same && in_order) { /* base's item as it is */
            seen[at - 1] = 1;
            kept++;
            Py_DECREF(key);
        } else {
            PyObject *value;
            if (same || !vs) {
                value = same ? old : Py_None;
                Py_INCREF(value);
            } else if (last_value && same_utf8(last_value, vs, vn)) { /* the previous change's parent: one object */
                value = last_value;
                Py_INCREF(value);
            } else {
                value = PyUnicode_DecodeUTF8(vs, vn, "strict");
                if (!value) {
                    Py_DECREF(key);
                    goto not_utf8;
                }
                Py_XSETREF(last_value, value);
                Py_INCREF(value);
            }
            PyObject *item = PyTuple_Pack(2, key, value);
            int bad = !item || PyList_Append(changes, item) < 0 || (old && !same && PyList_Append(moved, key) < 0);
            fresh |= !old;
            Py_XDECREF(item);
            Py_DECREF(key);
            Py_DECREF(value);
            if (bad) goto done;
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}') {
            p++;
            break;
        }
        goto subset;
    }
tail:
    if (skip_ws(p, end) != end) goto subset;
    /* base's items, less the ones not named here with their parent, then the changes: a copy of base less those,
     * or (most of base changed: a tree of other code) the kept items put in a new dict */
    if (kept * 2 >= PyDict_GET_SIZE(base)) {
        tree = PyDict_Copy(base);
        if (!tree) goto done;
        for (Py_ssize_t pos = 0; PyDict_Next(base, &pos, &k, &v);)
            if (!seen[pos - 1] && PyDict_DelItem(tree, k) < 0) goto done;
    } else {
        tree = PyDict_New();
        if (!tree) goto done;
        for (Py_ssize_t pos = 0; PyDict_Next(base, &pos, &k, &v);)
            if (seen[pos - 1] && PyDict_SetItem(tree, k, v) < 0) goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(changes); i++) {
        PyObject *item = PyList_GET_ITEM(changes, i);
        if (PyDict_SetItem(tree, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1)) < 0) goto done;
    }
    if (PyDict_GET_SIZE(tree) != members) goto subset; /* a name given twice: the full read's order of values */
    result = Py_BuildValue("(OOO)", tree, moved, fresh ? Py_True : Py_False);
    goto done;
not_utf8:
    PyErr_Clear();
subset: /* not the subset: None, for the full parser to read (and report) */
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(seen);
    Py_XDECREF(last_value);
    Py_XDECREF(tree);
    Py_XDECREF(changes);
    Py_XDECREF(moved);
    PyBuffer_Release(&raw);
    return result;
}

/* whether the text ends with the ASCII `tail` at `end` (the text before position `end`) */
static int ends_with(int kind, const void *data, Py_ssize_t end, const char *tail) {
    Py_ssize_t n = (Py_ssize_t)strlen(tail);
    if (end < n) return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyUnicode_READ(kind, data, end - n + k) != (Py_UCS4)(unsigned char)tail[k]) return 0;
    return 1;
}

/* pair.calls.call_keys' two substitutions for one name: `X.<digits>.forward` -> `X..forward` (or backward), else
 * `X.forward.<digits>` -> `X.forward.` (or backward); digits are Unicode decimals, as the patterns' \d. A new
 * reference (the name itself when neither applies). */
static PyObject *call_key_of(PyObject *name) {
    int kind = PyUnicode_KIND(name);
    const void *data = PyUnicode_DATA(name);
    Py_ssize_t len = PyUnicode_GET_LENGTH(name);
    static const char *dirs[] = {"forward", "backward"};
    for (int d = 0; d < 2; d++) {
        Py_ssize_t dl = (Py_ssize_t)strlen(dirs[d]);
        if (!ends_with(kind, data, len, dirs[d]) || len < dl + 1 ||
            PyUnicode_READ(kind, data, len - dl - 1) != '.')
            continue;
        Py_ssize_t i = len - dl - 2; /* the digits before `.forward` */
        while (i >= 0 && Py_UNICODE_ISDECIMAL(PyUnicode_READ(kind, data, i))) i--;
        if (i == len - dl - 2 || i < 0 || PyUnicode_READ(kind, data, i) != '.') return Py_NewRef(name);
        PyObject *head = PyUnicode_Substring(name, 0, i), *tail = PyUnicode_FromFormat("..%s", dirs[d]);
        PyObject *out = head && tail ? PyUnicode_Concat(head, tail) : NULL;
        Py_XDECREF(head);
        Py_XDECREF(tail);
        return out;
    }
    Py_ssize_t i = len - 1; /* trailing digits after `.forward.` or `.backward.` */
    while (i >= 0 && Py_UNICODE_ISDECIMAL(PyUnicode_READ(kind, data, i))) i--;
    if (i < len - 1 && (ends_with(kind, data, i + 1, ".forward.") || ends_with(kind, data, i + 1, ".backward.")))
        return PyUnicode_Substring(name, 0, i + 1);
    return Py_NewRef(name);
}

static PyObject *call_keys(PyObject *self, PyObject *args) {
    PyObject *names;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &names)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++) { /* a line break inside a name: the caller's per-name rule */
        PyObject *s = PyList_GET_ITEM(names, i);
        if (!PyUnicode_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "call_keys: names must be str");
            return NULL;
        }
        if (PyUnicode_FindChar(s, '\n', 0, PyUnicode_GET_LENGTH(s), 1) != -1) Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = call_key_of(PyList_GET_ITEM(names, i));
        if (!key) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, key);
    }
    return out;
}

/* whether `needle` (ASCII) occurs in the text (the kind's code units compared with the ASCII bytes) */
static int contains(PyObject *s, const char *needle, Py_ssize_t nlen) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND) {
        const char *d = (const char *)PyUnicode_1BYTE_DATA(s);
        for (Py_ssize_t i = 0; i + nlen <= len; i++)
            if (d[i] == needle[0] && memcmp(d + i, needle, (size_t)nlen) == 0) return 1;
        return 0;
    }
    PyObject *sub = PyUnicode_FromStringAndSize(needle, nlen);
    if (!sub) return -1;
    Py_ssize_t at = PyUnicode_Find(s, sub, 0, len, 1);
    Py_DECREF(sub);
    return at == -2 ? -1 : at >= 0;
}

/* rows.is_inplace: the API part (`entry.rsplit(".", 2)[0].rsplit(".", 1)[-1]`) ends with one "_", not "__" */
static int inplace_api(PyObject *s, Py_ssize_t len) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t end = len, dots = 0; /* the head: the text before its second-to-last dot (or its only one) */
    for (Py_ssize_t i = len - 1; i >= 0 && dots < 2; i--)
        if (PyUnicode_READ(kind, data, i) == '.') {
            dots++;
            end = i;
        }
    return end >= 1 && PyUnicode_READ(kind, data, end - 1) == '_' &&
           !(end >= 2 && PyUnicode_READ(kind, data, end - 2) == '_');
}

static PyObject *phase_flags(PyObject *self, PyObject *args) {
    PyObject *entries;
    Py_buffer bw, gr, en, ud;
    if (!PyArg_ParseTuple(args, "O!w*w*w*w*", &PyList_Type, &entries, &bw, &gr, &en, &ud)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (sized(&bw, 1, n, "backward") < 0 || sized(&gr, 1, n, "grad") < 0 || sized(&en, 1, n, "ends") < 0 ||
        sized(&ud, 1, n, "inplace") < 0)
        goto done;
    unsigned char *backward = bw.buf, *grad = gr.buf, *ends = en.buf, *inplace = ud.buf;
    static const char tail[] = ".backward";
    const Py_ssize_t tlen = sizeof(tail) - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GET_ITEM(entries, i);
        if (!PyUnicode_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "phase_flags: entries must be str");
            goto done;
        }
        int b = contains(s, "backward", 8), g = contains(s, "parameters_grad", 15), u = contains(s, "_.", 2);
        if (b < 0 || g < 0 || u < 0) goto done;
        Py_ssize_t len = PyUnicode_GET_LENGTH(s);
        if (u) u = inplace_api(s, len);
        int e = 0;
        if (len >= tlen) {
            int kind = PyUnicode_KIND(s);
            const void *data = PyUnicode_DATA(s);
            e = 1;
            for (Py_ssize_t k = 0; k < tlen && e; k++)
                e = PyUnicode_READ(kind, data, len - tlen + k) == (Py_UCS4)(unsigned char)tail[k];
        }
        backward[i] = (unsigned char)b;
        grad[i] = (unsigned char)g;
        ends[i] = (unsigned char)e;
        inplace[i] = (unsigned char)u;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&bw);
    PyBuffer_Release(&gr);
    PyBuffer_Release(&en);
    PyBuffer_Release(&ud);
    return result;
}


/* module_scan: a side's module calls in one pass (pair/align.py's module_calls). */

typedef struct {
    Py_ssize_t entry, count, node, layout;
    Py_ssize_t po, pl, co, cl; /* its path's and class's bytes in the entry's UTF-8: offset, length */
    PyObject *path, *cls, *slots; /* owned */
} ScanCall;

/* Slot layouts: the calls whose slots hold the same keys in the same order share a layout (numbered in order of
 * first use); a table of (hash of the keys, the first call with it). */
typedef struct {
    uint64_t hash;
    Py_ssize_t call; /* -1: empty */
} LayoutSlot;

/* The layout of calls[c] (its slots made), given the layouts of the calls before it; -1 on error. */
static Py_ssize_t layout_of(LayoutSlot **table, size_t *mask, Py_ssize_t *used, const void *calls_, Py_ssize_t c);

static Py_ssize_t last_dot(const char *s, Py_ssize_t n);

/* The backward and parameters_grad entries by (path, class, counter) (-1 for parameters_grad), in C: no key objects.
 * A slot holds an entry and where its path and class are in its UTF-8 bytes; e < 0: empty. */
typedef struct {
    uint64_t hash;
    Py_ssize_t e, po, pl, co, cl;
    long long count;
} KeySlot;

typedef struct {
    KeySlot *slots;
    size_t mask;
    Py_ssize_t used;
} KeyTable;

static uint64_t key_hash(const char *s, Py_ssize_t po, Py_ssize_t pl, Py_ssize_t co, Py_ssize_t cl, long long count) {
    return (hash_bytes(s + po, pl) * 1000003u) ^ hash_bytes(s + co, cl) ^ ((uint64_t)count * 0x9E3779B97F4A7C15u);
}

/* The slot of the key (path, class, count) of entry text s, or of an empty slot where it goes; -1 on error. */
static Py_ssize_t key_slot(KeyTable *t, PyObject *entries, const char *s, Py_ssize_t po, Py_ssize_t pl, Py_ssize_t co,
                           Py_ssize_t cl, long long count, uint64_t h) {
    for (size_t k = (size_t)h & t->mask;; k = (k + 1) & t->mask) {
        KeySlot *slot = &t->slots[k];
        if (slot->e < 0) return (Py_ssize_t)k;
        if (slot->hash != h || slot->count != count || slot->pl != pl || slot->cl != cl) continue;
        Py_ssize_t len;
        const char *o = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(entries, slot->e), &len);
        if (!o) return -1;
        if (memcmp(o + slot->po, s + po, (size_t)pl) == 0 && memcmp(o + slot->co, s + co, (size_t)cl) == 0)
            return (Py_ssize_t)k;
    }
}

/* Put entry e under its key: a key met before keeps its first entry (`first`) or takes this one. */
static int key_put(KeyTable *t, PyObject *entries, Py_ssize_t e, const char *s, Py_ssize_t po, Py_ssize_t pl,
                   Py_ssize_t co, Py_ssize_t cl, long long count, int first) {
    if ((size_t)(t->used + 1) * 2 > t->mask + 1) { /* grow: rehash by the kept hashes */
        size_t cap = (t->mask + 1) * 2;
        KeySlot *grown = PyMem_Malloc(cap * sizeof(KeySlot));
        if (!grown) return PyErr_NoMemory(), -1;
        for (size_t k = 0; k < cap; k++) grown[k].e = -1;
        for (size_t k = 0; k <= t->mask; k++) {
            if (t->slots[k].e < 0) continue;
            size_t q = (size_t)t->slots[k].hash & (cap - 1);
            while (grown[q].e >= 0) q = (q + 1) & (cap - 1);
            grown[q] = t->slots[k];
        }
        PyMem_Free(t->slots);
        t->slots = grown;
        t->mask = cap - 1;
    }
    uint64_t h = key_hash(s, po, pl, co, cl, count);
    Py_ssize_t k = key_slot(t, entries, s, po, pl, co, cl, count, h);
    if (k < 0) return -1;
    KeySlot *slot = &t->slots[k];
    if (slot->e >= 0 && first) return 0;
    if (slot->e < 0) t->used++;
    *slot = (KeySlot){h, e, po, pl, co, cl, count};
    return 0;
}

/* The entry under the key, -1 for none, -2 on error. */
static Py_ssize_t key_get(KeyTable *t, PyObject *entries, const char *s, Py_ssize_t po, Py_ssize_t pl, Py_ssize_t co,
                          Py_ssize_t cl, long long count) {
    Py_ssize_t k = key_slot(t, entries, s, po, pl, co, cl, count, key_hash(s, po, pl, co, cl, count));
    return k < 0 ? -2 : t->slots[k].e;
}

static int key_table(KeyTable *t) {
    t->slots = PyMem_Malloc(256 * sizeof(KeySlot));
    if (!t->slots) return PyErr_NoMemory(), -1;
    for (size_t k = 0; k < 256; k++) t->slots[k].e = -1;
    t->mask = 255;
    t->used = 0;
    return 0;
}

/* `text.partition('.')[2].rpartition('.')` of text = s[0:n] as spans: path at *po (*pl bytes), class at *co. */
static void path_spans(const char *s, Py_ssize_t n, Py_ssize_t *po, Py_ssize_t *pl, Py_ssize_t *co, Py_ssize_t *cl) {
    const char *dot = memchr(s, '.', (size_t)n);
    const char *rest = dot ? dot + 1 : s + n;
    Py_ssize_t m = (s + n) - rest, d = last_dot(rest, m);
    *po = rest - s;
    *pl = d < 0 ? 0 : d;
    *co = (rest - s) + d + 1;
    *cl = m - d - 1;
}


/* rpartition(s, '.') over UTF-8 bytes: the position of the last '.', -1 for none ('.' is never inside a multi-byte
 * character, so byte positions split where str's do). */
static Py_ssize_t last_dot(const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (s[i] == '.') return i;
    return -1;
}

static int is_text(const char *s, Py_ssize_t n, const char *want) {
    return (size_t)n == strlen(want) && memcmp(s, want, (size_t)n) == 0;
}

/* A call counter: 1 to 18 ASCII digits (the Python twin's rule), else -1. */
static long long counter(const char *s, Py_ssize_t n) {
    if (n < 1 || n > 18) return -1;
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int set_index(PyObject *dict, PyObject *key, Py_ssize_t value, int keep_first) {
    PyObject *v = PyLong_FromSsize_t(value);
    if (!v) return -1;
    int rc = 0;
    if (keep_first) {
        PyObject *got = PyDict_SetDefault(dict, key, v);
        rc = got ? 0 : -1;
    } else {
        rc = PyDict_SetItem(dict, key, v);
    }
    Py_DECREF(v);
    return rc;
}

/* The modules met by name (forward calls' entries, parents in the tree): per node its call (the last forward call
 * of that name, -1 for none) and the first entry inside it (-1 until met); `nodes` maps a name to its node. */
typedef struct {
    PyObject *nodes;
    Py_ssize_t *call, *first, n, cap;
} Nodes;

/* The node of `name`, made when new; -1 on error. */
static Py_ssize_t node_of(Nodes *t, PyObject *name) {
    PyObject *got = PyDict_GetItemWithError(t->nodes, name);
    if (got) return PyLong_AsSsize_t(got);
    if (PyErr_Occurred()) return -1;
    if (t->n == t->cap) {
        Py_ssize_t more = t->cap ? t->cap * 2 : 1024;
        Py_ssize_t *call = PyMem_Realloc(t->call, (size_t)more * sizeof(Py_ssize_t));
        if (!call) return PyErr_NoMemory(), -1;
        t->call = call;
        Py_ssize_t *first = PyMem_Realloc(t->first, (size_t)more * sizeof(Py_ssize_t));
        if (!first) return PyErr_NoMemory(), -1;
        t->first = first;
        t->cap = more;
    }
    if (set_index(t->nodes, name, t->n, 0) < 0) return -1;
    t->call[t->n] = t->first[t->n] = -1;
    return t->n++;
}

static Py_ssize_t layout_of(LayoutSlot **table, size_t *mask, Py_ssize_t *used, const void *calls_, Py_ssize_t c) {
    const ScanCall *calls = calls_;
    PyObject *slots = calls[c].slots, *k, *v;
    uint64_t h = (uint64_t)PyDict_GET_SIZE(slots) * 0x9E3779B97F4A7C15u;
    for (Py_ssize_t pos = 0; PyDict_Next(slots, &pos, &k, &v);) {
        Py_hash_t kh = PyObject_Hash(k); /* cached: the key was hashed when put in the dict */
        if (kh == -1) return -1;
        h = (h ^ (uint64_t)kh) * 1099511628211u;
    }
    if ((size_t)(*used + 1) * 2 > *mask + 1) { /* grow */
        size_t cap = (*mask + 1) * 2;
        LayoutSlot *grown = PyMem_Malloc(cap * sizeof(LayoutSlot));
        if (!grown) return PyErr_NoMemory(), -1;
        for (size_t q = 0; q < cap; q++) grown[q].call = -1;
        for (size_t q = 0; q <= *mask; q++) {
            if ((*table)[q].call < 0) continue;
            size_t r = (size_t)(*table)[q].hash & (cap - 1);
            while (grown[r].call >= 0) r = (r + 1) & (cap - 1);
            grown[r] = (*table)[q];
        }
        PyMem_Free(*table);
        *table = grown;
        *mask = cap - 1;
    }
    for (size_t q = (size_t)h & *mask;; q = (q + 1) & *mask) {
        LayoutSlot *slot = &(*table)[q];
        if (slot->call < 0) {
            *slot = (LayoutSlot){h, c};
            return (*used)++;
        }
        if (slot->hash != h) continue;
        PyObject *other = calls[slot->call].slots;
        if (PyDict_GET_SIZE(other) != PyDict_GET_SIZE(slots)) continue;
        int same = 1;
        PyObject *ka, *kb;
        for (Py_ssize_t pa = 0, pb = 0; same && PyDict_Next(slots, &pa, &ka, &v) && PyDict_Next(other, &pb, &kb, &v);) {
            same = PyObject_RichCompareBool(ka, kb, Py_EQ);
            if (same < 0) return -1;
        }
        if (same) return calls[slot->call].layout;
    }
}

/* Texts made once per distinct value: module_scan's slot keys, module paths and classes repeat across the calls
 * (every layer, every micro-batch), so each is decoded, allocated and hashed once; by its UTF-8 bytes. */
typedef struct {
    PyObject *text;
    uint64_t hash;
} TextSlot;

typedef struct {
    TextSlot *slot;
    size_t mask;
    Py_ssize_t used;
} TextCache;

static int text_cache_grow(TextCache *c) {
    size_t size = c->slot ? (c->mask + 1) * 2 : 256;
    TextSlot *grown = PyMem_Calloc(size, sizeof(TextSlot));
    if (!grown) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; c->slot && i <= c->mask; i++) {
        if (!c->slot[i].text) continue;
        size_t j = (size_t)c->slot[i].hash & (size - 1);
        while (grown[j].text) j = (j + 1) & (size - 1);
        grown[j] = c->slot[i];
    }
    PyMem_Free(c->slot);
    c->slot = grown;
    c->mask = size - 1;
    return 0;
}

/* A new reference to the text of the UTF-8 bytes s[0:n] (NULL with an exception: not UTF-8, no memory). */
static PyObject *text_of(TextCache *c, const char *s, Py_ssize_t n) {
    if ((!c->slot || (size_t)(c->used + 1) * 2 > c->mask + 1) && text_cache_grow(c) < 0) return NULL;
    uint64_t h = hash_bytes(s, n); /* seeded: no input chosen to collide makes it quadratic */
    size_t i = (size_t)h & c->mask;
    for (; c->slot[i].text; i = (i + 1) & c->mask) {
        if (c->slot[i].hash != h) continue;
        Py_ssize_t len;
        const char *t = PyUnicode_AsUTF8AndSize(c->slot[i].text, &len);
        if (!t) return NULL;
        if (len == n && memcmp(t, s, (size_t)n) == 0) {
            Py_INCREF(c->slot[i].text);
            return c->slot[i].text;
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8(s, n, NULL);
    if (!text) return NULL;
    Py_INCREF(text);
    c->slot[i] = (TextSlot){text, h};
    c->used++;
    return text;
}

static void text_cache_free(TextCache *c) {
    for (size_t i = 0; c->slot && i <= c->mask; i++) Py_XDECREF(c->slot[i].text);
    PyMem_Free(c->slot);
    c->slot = NULL;
}

/* Two texts alike: the same object, or str of the same code points. */
static int same_str(PyObject *a, PyObject *b) {
    return a == b || (PyUnicode_Check(a) && PyUnicode_Check(b) && PyUnicode_GET_LENGTH(a) == PyUnicode_GET_LENGTH(b) &&
                      PyUnicode_Compare(a, b) == 0);
}

static PyObject *module_scan(PyObject *self, PyObject *args) {
    PyObject *entries, *names, *prefixes, *tree;
    Py_buffer bb;
    if (!PyArg_ParseTuple(args, "O!O!y*O!O", &PyList_Type, &entries, &PyList_Type, &names, &bb, &PyTuple_Type,
                          &prefixes, &tree))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries), rows = PyList_GET_SIZE(names), np = PyTuple_GET_SIZE(prefixes);
    PyObject *result = NULL, *mask = NULL, *out = NULL, *up_call = NULL;
    Nodes nodes = {NULL, NULL, NULL, 0, 0};
    KeyTable backward = {NULL, 0, 0}, grads = {NULL, 0, 0};
    LayoutSlot *layouts = NULL;
    size_t layout_mask = 0;
    Py_ssize_t layout_used = 0;
    ScanCall *calls = NULL;
    Py_ssize_t ncalls = 0, cap = 0;
    TextCache texts = {NULL, 0, 0};
    const int64_t *bounds = (const int64_t *)bb.buf;
    if (tree != Py_None && !PyDict_CheckExact(tree)) {
        PyErr_SetString(PyExc_TypeError, "module_scan: tree must be a dict or None");
        goto done;
    }
    if (sized(&bb, 8, n + 1, "module_scan: bounds") < 0) goto done;
    for (Py_ssize_t i = 0; i < np; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(prefixes, i))) {
            PyErr_SetString(PyExc_TypeError, "module_scan: prefixes must be texts");
            goto done;
        }
    mask = PyBytes_FromStringAndSize(NULL, n);
    nodes.nodes = PyDict_New();
    if (!mask || !nodes.nodes || key_table(&backward) < 0 || key_table(&grads) < 0) goto done;
    layouts = PyMem_Malloc(64 * sizeof(LayoutSlot));
    if (!layouts) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t q = 0; q < 64; q++) layouts[q].call = -1;
    layout_mask = 63;
    char *is_module = PyBytes_AS_STRING(mask);
    memset(is_module, 0, (size_t)n);
    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *entry = PyList_GET_ITEM(entries, e);
        Py_ssize_t len;
        if (!PyUnicode_Check(entry)) {
            PyErr_SetString(PyExc_TypeError, "module_scan: entries must be texts");
            goto done;
        }
        const char *s = PyUnicode_AsUTF8AndSize(entry, &len);
        if (!s) goto done;
        int hit = 0;
        for (Py_ssize_t i = 0; i < np && !hit; i++) {
            Py_ssize_t pn;
            const char *p = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(prefixes, i), &pn);
            if (!p) goto done;
            hit = len >= pn && memcmp(s, p, (size_t)pn) == 0;
        }
        if (!hit) {
            is_module[e] = (char)(len >= 8 && memcmp(s + len - 8, ".forward", 8) == 0 ? 2 : 0);
            continue;
        }
        is_module[e] = 1;
        Py_ssize_t d1 = last_dot(s, len), hlen = d1 < 0 ? 0 : d1;
        const char *last = s + d1 + 1;
        Py_ssize_t lastn = len - d1 - 1;
        Py_ssize_t po, pl, co, cl;
        if (is_text(last, lastn, "parameters_grad")) {
            path_spans(s, hlen, &po, &pl, &co, &cl);
            if (key_put(&grads, entries, e, s, po, pl, co, cl, -1, 1) < 0) goto done;
            continue;
        }
        Py_ssize_t d2 = last_dot(s, hlen), slen = d2 < 0 ? 0 : d2;
        const char *dir = s + d2 + 1;
        Py_ssize_t dirn = hlen - d2 - 1;
        long long count = counter(last, lastn);
        int fwd = is_text(dir, dirn, "forward"), bwd = is_text(dir, dirn, "backward");
        if (count < 0 || (!fwd && !bwd)) continue;
        path_spans(s, slen, &po, &pl, &co, &cl);
        if (pl == 0) continue; /* no path: not a module call */
        if (bwd) {
            if (key_put(&backward, entries, e, s, po, pl, co, cl, count, 0) < 0) goto done;
            continue;
        }
        PyObject *path = text_of(&texts, s + po, pl), *cls = text_of(&texts, s + co, cl);
        if (!path || !cls) {
            Py_XDECREF(path);
            Py_XDECREF(cls);
            goto done;
        }
        int64_t lo = bounds[e], hi = bounds[e + 1];
        PyObject *slots = PyDict_New();
        if (!slots || lo < 0 || hi < lo || hi > rows) {
            if (slots) PyErr_SetString(PyExc_ValueError, "module_scan: bounds outside the names");
            Py_XDECREF(slots);
            Py_DECREF(path);
            Py_DECREF(cls);
            goto done;
        }
        Py_ssize_t cut = PyUnicode_GET_LENGTH(entry) + 1;
        for (int64_t r = lo; r < hi; r++) {
            PyObject *name = PyList_GET_ITEM(names, (Py_ssize_t)r), *k = NULL;
            Py_ssize_t nl;
            const char *ns = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &nl) : NULL;
            if (ns && nl > len && ns[len] == '.' && memcmp(ns, s, (size_t)len) == 0)
                k = text_of(&texts, ns + len + 1, nl - len - 1); /* the row's key: its name less the entry's and a dot */
            else if (ns)
                k = PyUnicode_Substring(name, cut, PY_SSIZE_T_MAX);
            if (!k && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "module_scan: names must be texts");
            int bad = !k || set_index(slots, k, (Py_ssize_t)r, 1) < 0;
            Py_XDECREF(k);
            if (bad) {
                Py_DECREF(slots);
                Py_DECREF(path);
                Py_DECREF(cls);
                goto done;
            }
        }
        if (ncalls == cap) {
            Py_ssize_t more = cap ? cap * 2 : 256;
            ScanCall *grown = PyMem_Realloc(calls, (size_t)more * sizeof(ScanCall));
            if (!grown) {
                PyErr_NoMemory();
                Py_DECREF(slots);
                Py_DECREF(path);
                Py_DECREF(cls);
                goto done;
            }
            calls = grown;
            cap = more;
        }
        calls[ncalls++] = (ScanCall){e, (Py_ssize_t)count, -1, -1, po, pl, co, cl, path, cls, slots};
        if ((calls[ncalls - 1].layout = layout_of(&layouts, &layout_mask, &layout_used, calls, ncalls - 1)) < 0)
            goto done;
        Py_ssize_t k = node_of(&nodes, entry);
        if (k < 0) goto done;
        nodes.call[k] = ncalls - 1; /* a name given twice: its last call */
        calls[ncalls - 1].node = k;
    }
    if (tree != Py_None) { /* per entry its parent's call; per module the first entry inside it */
        up_call = PyBytes_FromStringAndSize(NULL, n * 8);
        if (!up_call) goto done;
        int64_t *pc = (int64_t *)PyBytes_AS_STRING(up_call);
        /* The tree's items are walked beside the entries (construct.json is mostly written in the dump's order): an
         * entry that is the next item's name takes its parent without a hash lookup. */
        Py_ssize_t pos = 0, misses = 0, budget = n; /* budget: the items skipped ahead in all, at most n */
        PyObject *tk = NULL, *tv = NULL, *last = NULL;
        int more = PyDict_Next(tree, &pos, &tk, &tv);
        Py_ssize_t last_call = -1;
        for (Py_ssize_t e = 0; e < n; e++) {
            PyObject *entry = PyList_GET_ITEM(entries, e), *parent;
            if (more && same_str(tk, entry)) {
                parent = tv;
                more = PyDict_Next(tree, &pos, &tk, &tv);
                misses = 0;
            } else {
                parent = PyDict_GetItemWithError(tree, entry);
                if (!parent && PyErr_Occurred()) goto done;
                if (!parent) parent = Py_None;
                if (more && ++misses >= 8 && budget > 0) { /* out of step: look a little ahead for this entry */
                    Py_ssize_t at = pos;
                    PyObject *k = tk, *v = tv;
                    int found = 0;
                    for (int step = 0; step < 256 && budget > 0 && PyDict_Next(tree, &at, &k, &v); step++) {
                        budget--;
                        if (same_str(k, entry)) {
                            found = 1;
                            break;
                        }
                    }
                    if (found) { /* in step again after it */
                        pos = at;
                        more = PyDict_Next(tree, &pos, &tk, &tv);
                    }
                    misses = 0;
                }
            }
            if (parent != Py_None && last && same_str(parent, last)) {
                pc[e] = last_call; /* the previous entry's parent: its call and first entry are known */
                continue;
            }
            last = parent;
            last_call = -1;
            if (parent == Py_None) {
                pc[e] = -1;
                continue;
            }
            Py_ssize_t k = node_of(&nodes, parent);
            int truthy = k < 0 ? -1 : PyObject_IsTrue(parent);
            if (truthy < 0) goto done;
            if (truthy) last_call = nodes.call[k];
            pc[e] = last_call;
            while (nodes.first[k] < 0) { /* the modules around it met for the first time */
                nodes.first[k] = e;
                PyObject *up = PyDict_GetItemWithError(tree, parent);
                if (!up && PyErr_Occurred()) goto done;
                if (!up || up == Py_None) break;
                parent = up;
                if ((k = node_of(&nodes, parent)) < 0) goto done;
            }
        }
    }
    out = PyList_New(ncalls);
    if (!out) goto done;
    for (Py_ssize_t c = 0; c < ncalls; c++) {
        ScanCall *k = &calls[c];
        Py_ssize_t parent = -1, start = k->entry, bwd = -1, grad = -1;
        if (up_call) {
            parent = (Py_ssize_t)((const int64_t *)PyBytes_AS_STRING(up_call))[k->entry];
            Py_ssize_t f = nodes.first[k->node];
            if (f >= 0 && f < start) start = f;
        }
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(entries, k->entry), &len);
        if (!s || (bwd = key_get(&backward, entries, s, k->po, k->pl, k->co, k->cl, k->count)) == -2) goto done;
        if (k->count == 0 && (grad = key_get(&grads, entries, s, k->po, k->pl, k->co, k->cl, -1)) == -2) goto done;
        PyObject *item = Py_BuildValue("(nOOnnnOnnn)", k->entry, k->path, k->cls, k->count, parent, start, k->slots,
                                       bwd, grad, k->layout);
        if (!item) goto done;
        PyList_SET_ITEM(out, c, item);
    }
    result = Py_BuildValue("(OOO)", out, up_call ? up_call : Py_None, mask);
done:
    result = none_on_encode_error(result); /* lone surrogates: the Python twin */
    for (Py_ssize_t c = 0; c < ncalls; c++) {
        Py_DECREF(calls[c].path);
        Py_DECREF(calls[c].cls);
        Py_DECREF(calls[c].slots);
    }
    PyMem_Free(calls);
    text_cache_free(&texts);
    Py_XDECREF(out);
    Py_XDECREF(mask);
    Py_XDECREF(nodes.nodes);
    PyMem_Free(nodes.call);
    PyMem_Free(nodes.first);
    PyMem_Free(backward.slots);
    PyMem_Free(grads.slots);
    PyMem_Free(layouts);
    Py_XDECREF(up_call);
    PyBuffer_Release(&bb);
    return result;
}


/* rows_alike and keyed_rows: rows of entries by their keys (a row's name less its entry's name and a dot). */

/* The key of `name` (str[cut:], cut in code points): *s, *n over its UTF-8 bytes when the name is ASCII (a code
 * point a byte), else *key a new str. 0, or -1 on error. */
static int key_of(PyObject *name, Py_ssize_t cut, const char **s, Py_ssize_t *n, PyObject **key) {
    *key = NULL;
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "row names must be texts");
        return -1;
    }
    if (PyUnicode_IS_ASCII(name)) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(name);
        *s = (const char *)PyUnicode_DATA(name) + (cut < len ? cut : len);
        *n = cut < len ? len - cut : 0;
        return 0;
    }
    *key = PyUnicode_Substring(name, cut, PY_SSIZE_T_MAX);
    return *key ? 0 : -1;
}

/* Whether row a's key (cut ca) equals row b's (cut cb): 1, 0, -1 on error. */
static int same_key(PyObject *a, Py_ssize_t ca, PyObject *b, Py_ssize_t cb) {
    const char *sa = NULL, *sb = NULL;
    Py_ssize_t na = 0, nb = 0;
    PyObject *ka, *kb;
    if (key_of(a, ca, &sa, &na, &ka) < 0) return -1;
    if (key_of(b, cb, &sb, &nb, &kb) < 0) {
        Py_XDECREF(ka);
        return -1;
    }
    int eq;
    if (!ka && !kb) {
        eq = na == nb && memcmp(sa, sb, (size_t)na) == 0;
    } else { /* a text beyond ASCII: compared as str */
        if (!ka) ka = PyUnicode_FromStringAndSize(sa, na);
        if (!kb) kb = PyUnicode_FromStringAndSize(sb, nb);
        eq = ka && kb ? PyObject_RichCompareBool(ka, kb, Py_EQ) : -1;
    }
    Py_XDECREF(ka);
    Py_XDECREF(kb);
    return eq;
}

static int entry_rows(const int64_t *bounds, Py_ssize_t entries, Py_ssize_t rows, int64_t e, int64_t *lo,
                      int64_t *hi) {
    if (e < 0 || e >= entries || bounds[e] < 0 || bounds[e + 1] < bounds[e] || bounds[e + 1] > rows) {
        PyErr_SetString(PyExc_ValueError, "an entry or its bounds outside the table");
        return -1;
    }
    *lo = bounds[e];
    *hi = bounds[e + 1];
    return 0;
}

static Py_ssize_t cut_of(PyObject *entries, int64_t e) {
    PyObject *entry = PyList_GET_ITEM(entries, (Py_ssize_t)e);
    if (!PyUnicode_Check(entry)) {
        PyErr_SetString(PyExc_TypeError, "entries must be texts");
        return -1;
    }
    return PyUnicode_GET_LENGTH(entry) + 1;
}

static PyObject *rows_alike(PyObject *self, PyObject *args) {
    PyObject *names_n, *entries_n, *shape_n, *names_b, *entries_b, *shape_b, *result = NULL;
    Py_buffer bn, bb, en, eb;
    if (!PyArg_ParseTuple(args, "O!y*O!O!O!y*O!O!y*y*", &PyList_Type, &names_n, &bn, &PyList_Type, &entries_n,
                          &PyList_Type, &shape_n, &PyList_Type, &names_b, &bb, &PyList_Type, &entries_b,
                          &PyList_Type, &shape_b, &en, &eb))
        return NULL;
    Py_ssize_t k = en.len / 8, rn = PyList_GET_SIZE(names_n), rb = PyList_GET_SIZE(names_b);
    Py_ssize_t xn = PyList_GET_SIZE(entries_n), xb = PyList_GET_SIZE(entries_b);
    const int64_t *bounds_n = bn.buf, *bounds_b = bb.buf, *e_n = en.buf, *e_b = eb.buf;
    if (sized(&bn, 8, xn + 1, "rows_alike: npu bounds") < 0 || sized(&bb, 8, xb + 1, "rows_alike: bench bounds") < 0 ||
        sized(&en, 8, k, "rows_alike: npu entries") < 0 || sized(&eb, 8, k, "rows_alike: bench entries") < 0)
        goto done;
    if (PyList_GET_SIZE(shape_n) != rn || PyList_GET_SIZE(shape_b) != rb) {
        PyErr_SetString(PyExc_ValueError, "rows_alike: a shape a row");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, k);
    if (!result) goto done;
    char *code = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < k; i++) {
        int64_t lo_n, hi_n, lo_b, hi_b;
        if (entry_rows(bounds_n, xn, rn, e_n[i], &lo_n, &hi_n) < 0 || entry_rows(bounds_b, xb, rb, e_b[i], &lo_b, &hi_b) < 0)
            goto fail;
        code[i] = 0;
        if (hi_n - lo_n != hi_b - lo_b) continue;
        Py_ssize_t cn = cut_of(entries_n, e_n[i]), cb = cut_of(entries_b, e_b[i]);
        if (cn < 0 || cb < 0) goto fail;
        int same = 1, shapes = 1;
        for (int64_t j = 0; j < hi_n - lo_n && same; j++) {
            PyObject *a = PyList_GET_ITEM(names_n, lo_n + j), *b = PyList_GET_ITEM(names_b, lo_b + j);
            if (PyUnicode_Check(a) && PyUnicode_Check(b) && PyUnicode_IS_ASCII(a) && PyUnicode_IS_ASCII(b)) {
                /* the common case inline: ASCII names, a byte a character */
                Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
                Py_ssize_t ka = la > cn ? la - cn : 0, kb = lb > cb ? lb - cb : 0;
                same = ka == kb && memcmp((const char *)PyUnicode_DATA(a) + (la - ka),
                                          (const char *)PyUnicode_DATA(b) + (lb - kb), (size_t)ka) == 0;
            } else {
                same = same_key(a, cn, b, cb);
                if (same < 0) goto fail;
            }
            if (same && shapes) {
                PyObject *x = PyList_GET_ITEM(shape_n, lo_n + j), *y = PyList_GET_ITEM(shape_b, lo_b + j);
                shapes = x == y ? 1 : PyObject_RichCompareBool(x, y, Py_EQ);
                if (shapes < 0) goto fail;
            }
        }
        code[i] = (char)(same ? (shapes ? 2 : 1) : 0);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyBuffer_Release(&bn);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&en);
    PyBuffer_Release(&eb);
    return result;
}

static PyObject *keyed_rows(PyObject *self, PyObject *args) {
    PyObject *names, *entries, *keys, *result = NULL;
    Py_buffer bb, eb;
    if (!PyArg_ParseTuple(args, "O!y*O!y*O!", &PyList_Type, &names, &bb, &PyList_Type, &entries, &eb, &PyList_Type,
                          &keys))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(keys), rows = PyList_GET_SIZE(names), xn = PyList_GET_SIZE(entries);
    const int64_t *bounds = bb.buf, *want = eb.buf;
    if (sized(&bb, 8, xn + 1, "keyed_rows: bounds") < 0 || sized(&eb, 8, k, "keyed_rows: entries") < 0) goto done;
    result = PyBytes_FromStringAndSize(NULL, k * 8);
    if (!result) goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < k; i++) {
        int64_t lo, hi;
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (entry_rows(bounds, xn, rows, want[i], &lo, &hi) < 0) goto fail;
        Py_ssize_t cut = cut_of(entries, want[i]);
        if (cut < 0) goto fail;
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keyed_rows: keys must be texts");
            goto fail;
        }
        out[i] = -1;
        for (int64_t r = lo; r < hi; r++) {
            int eq = same_key(PyList_GET_ITEM(names, r), cut, key, 0);
            if (eq < 0) goto fail;
            if (eq) {
                out[i] = r;
                break;
            }
        }
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyBuffer_Release(&bb);
    PyBuffer_Release(&eb);
    return result;
}

static PyMethodDef methods[] = {
    {"code_objects", code_objects, METH_VARARGS,
     "code_objects(items) -> (int32 codes as bytes, distinct objects by identity, in order of first appearance)"},
    {"first_index", first_index, METH_VARARGS,
     "first_index(names, keys, out) -> repeated names: out[i] = the first j with names[j] == keys[i], or -1"},
    {"stem_counts", stem_counts, METH_VARARGS,
     "stem_counts(entries) -> {entry.rsplit('.', 2)[0]: count} of the entries ending with .forward or .backward"},
    {"containing", containing, METH_VARARGS,
     "containing(texts, needle) -> int64 positions (bytes) of the texts that contain needle, or None"},
    {"tree_beside", tree_beside, METH_VARARGS,
     "tree_beside(raw, base) -> (tree, moved names (list), fresh) for a construct.json of the plain subset, else None"},
    {"children", children, METH_VARARGS,
     "children(tree, modules) -> [(name, parent)] of the tree's items whose parent is in the set modules, in order"},
    {"call_keys", call_keys, METH_VARARGS,
     "call_keys(names) -> the names without their call counters, or None when a name holds a line break"},
    {"module_scan", module_scan, METH_VARARGS,
     "module_scan(entries, names, bounds, prefixes, tree) -> (calls, parent calls, flags) or None: "
     "pair.align's module calls in one pass"},
    {"rows_alike", rows_alike, METH_VARARGS,
     "rows_alike(names_n, bounds_n, entries_n, shape_n, names_b, bounds_b, entries_b, shape_b, e_n, e_b) -> "
     "int8 codes as bytes: 2 the same keys and shapes in order, 1 the same keys, 0 otherwise"},
    {"keyed_rows", keyed_rows, METH_VARARGS,
     "keyed_rows(names, bounds, entries, e, keys) -> int64 rows as bytes: the first row of entry e[i] keyed keys[i], "
     "-1 for none"},
    {"phase_flags", phase_flags, METH_VARARGS,
     "phase_flags(entries, backward, grad, ends, inplace): 'backward' in, 'parameters_grad' in, "
     "endswith('.backward'), a call of an in-place API"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sharednames",
                                    "Names and texts shared by the stages: joins, codes, flags, trees.", -1, methods};

PyMODINIT_FUNC PyInit__sharednames(void) {
    seeded_hash = PyHash_GetFuncDef()->hash;
    if (PyType_Ready(&NameIndexType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&NameIndexType);
    if (PyModule_AddObject(m, "NameIndex", (PyObject *)&NameIndexType) < 0) {
        Py_DECREF(&NameIndexType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
