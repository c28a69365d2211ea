/* Optional C accelerator for jitsim.analyses.graphcycles (issue 14): GraphCycles.insert_edges.
 *
 *   insert_edges(rank, outs, ins, edges) -> (stop, rank, outs, ins)
 *
 * rank: list of int (a permutation of 0..n-1), outs / ins: list of n lists of int (each
 * node's out- and in-sequence), edges: a sequence of (x, y) pairs. Inserts the edges one by
 * one with the Pearce-Kelly dynamic topological order exactly as GraphCycles.insert_edge does
 * (the Python code stays the reference): a duplicate edge is skipped; an edge whose ranks
 * disagree re-deals the ranks of the nodes reached forward from y below rank[x] and of those
 * reaching x backward above rank[y] (each group in old-rank order, the backward one first);
 * a self-loop or an edge that closes a cycle stops the insertion, and that edge is taken out
 * again. ``stop`` is that edge's index, or None when every edge went in. The inputs are not
 * modified: the new ranks come back as a new list, each node's new out- and in-sequence as a
 * pair (list of values, dict value -> position): an OrderedSet's two halves; with the optional
 * fifth argument, the OrderedSet class, each as an instance of it holding them.
 *
 * Which nodes are reached does not depend on the order of the search, and the ranks are
 * re-dealt in sorted order, so any complete search gives upstream's result; the sequences
 * only ever get appends (and one pop of the refused edge).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *v;
    Py_ssize_t n, cap;
} Vec;

/* Every buffer of this module comes from the raw allocator: the insertion loop of insert_edges
 * runs without the GIL (another thread's Python goes on meanwhile). */

/* Append x; -1 when out of memory, without a Python error (callable without the GIL). */
static inline int vec_push_nogil(Vec *a, int32_t x) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 4;
        int32_t *v = PyMem_RawRealloc(a->v, cap * sizeof(int32_t));
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* vec_push_nogil with MemoryError set on failure (the GIL held). */
static int vec_push(Vec *a, int32_t x) {
    if (vec_push_nogil(a, x) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *str_seq, *str_idx;

/* Where OrderedSet keeps its two slots: read once from its class's member descriptors, so that
 * the hot loops read them straight from the object (any other type goes through getattr). */
static PyTypeObject *os_type;
static Py_ssize_t os_off_seq, os_off_idx;

static void learn_type_layout(PyTypeObject *t) {
    PyObject *ds = PyObject_GetAttr((PyObject *)t, str_seq);
    PyObject *di = ds ? PyObject_GetAttr((PyObject *)t, str_idx) : NULL;
    if (ds && di && Py_IS_TYPE(ds, &PyMemberDescr_Type) && Py_IS_TYPE(di, &PyMemberDescr_Type)) {
        PyMemberDef *ms = ((PyMemberDescrObject *)ds)->d_member, *mi = ((PyMemberDescrObject *)di)->d_member;
        if (ms->type == T_OBJECT_EX && mi->type == T_OBJECT_EX) {
            Py_INCREF(t); /* kept: its address then never names another type */
            Py_XDECREF(os_type);
            os_type = t;
            os_off_seq = ms->offset;
            os_off_idx = mi->offset;
        }
    }
    Py_XDECREF(ds);
    Py_XDECREF(di);
    PyErr_Clear();
}

static void learn_os_layout(PyObject *os) { learn_type_layout(Py_TYPE(os)); }

/* A new instance of OrderedSet type `t` (whose layout is learned) holding seq and idx (stolen). */
static PyObject *new_os(PyTypeObject *t, PyObject *seq, PyObject *idx) {
    PyObject *o = t->tp_alloc(t, 0);
    if (!o) {
        Py_DECREF(seq);
        Py_DECREF(idx);
        return NULL;
    }
    *(PyObject **)((char *)o + os_off_seq) = seq;
    *(PyObject **)((char *)o + os_off_idx) = idx;
    return o;
}

/* ------------------------------------------------------------- edge set (open addressing) */

typedef struct {
    uint64_t *slot; /* 0: empty; else ((x + 1) << 32) | y */
    size_t mask, used;
} EdgeSet;

static inline uint64_t edge_key(int32_t x, int32_t y) {
    return ((uint64_t)(uint32_t)(x + 1) << 32) | (uint32_t)y;
}

static inline size_t edge_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static int es_init(EdgeSet *s, size_t expected) {
    size_t cap = 64;
    while (cap < expected * 2) cap <<= 1;
    s->slot = PyMem_RawCalloc(cap, sizeof(uint64_t));
    if (!s->slot) return -1; /* (no Python error: see vec_push_nogil) */
    s->mask = cap - 1;
    s->used = 0;
    return 0;
}

static int es_add(EdgeSet *s, uint64_t k); /* 1 added, 0 present, -1 error */

static int es_grow(EdgeSet *s) {
    EdgeSet t;
    if (es_init(&t, (s->mask + 1)) < 0) return -1;
    for (size_t i = 0; i <= s->mask; i++)
        if (s->slot[i]) es_add(&t, s->slot[i]);
    PyMem_RawFree(s->slot);
    *s = t;
    return 0;
}

static int es_add(EdgeSet *s, uint64_t k) {
    if ((s->used + 1) * 2 > s->mask + 1 && es_grow(s) < 0) return -1;
    size_t i = edge_hash(k) & s->mask;
    while (s->slot[i]) {
        if (s->slot[i] == k) return 0;
        i = (i + 1) & s->mask;
    }
    s->slot[i] = k;
    s->used++;
    return 1;
}

/* ----------------------------------------------------------------- sorting by rank */

/* Sort nodes by rank (ranks are distinct). Keys (rank << 32 | node), radix-sorted on the rank
 * bits for long runs, insertion sort for short ones. -1: out of memory (no Python error set). */
static int sort_by_rank(int32_t *nodes, Py_ssize_t k, const int32_t *rank, int rank_bits,
                        uint64_t **tmp_a, uint64_t **tmp_b, Py_ssize_t *tmp_cap) {
    if (k < 2) return 0;
    if (*tmp_cap < k) {
        Py_ssize_t cap = k * 2;
        uint64_t *a = PyMem_RawRealloc(*tmp_a, cap * sizeof(uint64_t));
        if (!a) return -1; /* (no Python error: see vec_push_nogil) */
        *tmp_a = a;
        uint64_t *b = PyMem_RawRealloc(*tmp_b, cap * sizeof(uint64_t));
        if (!b) return -1;
        *tmp_b = b;
        *tmp_cap = cap;
    }
    uint64_t *a = *tmp_a, *b = *tmp_b;
    for (Py_ssize_t i = 0; i < k; i++) a[i] = ((uint64_t)(uint32_t)rank[nodes[i]] << 32) | (uint32_t)nodes[i];
    if (k <= 48) {
        for (Py_ssize_t i = 1; i < k; i++) {
            uint64_t x = a[i];
            Py_ssize_t j = i;
            while (j > 0 && a[j - 1] > x) { a[j] = a[j - 1]; j--; }
            a[j] = x;
        }
    } else {
        enum { BITS = 11, RADIX = 1 << BITS };
        Py_ssize_t count[RADIX]; /* (not static: two threads may sort at once) */
        for (int shift = 32; shift < 32 + rank_bits; shift += BITS) {
            memset(count, 0, sizeof count);
            for (Py_ssize_t i = 0; i < k; i++) count[(a[i] >> shift) & (RADIX - 1)]++;
            Py_ssize_t sum = 0;
            for (int d = 0; d < RADIX; d++) { Py_ssize_t c = count[d]; count[d] = sum; sum += c; }
            for (Py_ssize_t i = 0; i < k; i++) b[count[(a[i] >> shift) & (RADIX - 1)]++] = a[i];
            uint64_t *t = a; a = b; b = t;
        }
    }
    for (Py_ssize_t i = 0; i < k; i++) nodes[i] = (int32_t)(a[i] & 0xFFFFFFFFu);
    return 0;
}

/* ------------------------------------------------------------------------- the pass */

static int read_int_list(PyObject *list, Py_ssize_t i, int32_t n, int32_t *out) {
    long v = PyLong_AsLong(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= n) {
        PyErr_SetString(PyExc_ValueError, "insert_edges: a node id or rank is out of range");
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* *off: n + 1 counts, the first 0, then each node's sequence length in `lists` (checked to be
 * a list of n lists); -1 with an exception set. */
static int seq_sizes(PyObject *lists, Py_ssize_t n, const char *what, Py_ssize_t **off) {
    if (!PyList_Check(lists) || PyList_GET_SIZE(lists) != n) {
        PyErr_Format(PyExc_TypeError, "insert_edges: %s must be a list of %zd lists", what, n);
        return -1;
    }
    Py_ssize_t *o = PyMem_RawCalloc(n + 1, sizeof(Py_ssize_t));
    if (!o) { PyErr_NoMemory(); return -1; }
    *off = o;
    for (Py_ssize_t v = 0; v < n; v++) {
        PyObject *seq = PyList_GET_ITEM(lists, v);
        if (!PyList_Check(seq)) {
            PyErr_Format(PyExc_TypeError, "insert_edges: %s must be a list of lists", what);
            return -1;
        }
        o[v + 1] = PyList_GET_SIZE(seq);
    }
    return 0;
}

/* Each node's sequence from `lists` (shape checked by seq_sizes) into `vecs`, whose room
 * seq_sizes made. */
static int load_seqs(PyObject *lists, Py_ssize_t n, Vec *vecs, const char *what) {
    for (Py_ssize_t v = 0; v < n; v++) {
        PyObject *seq = PyList_GET_SIZE(lists) == n ? PyList_GET_ITEM(lists, v) : NULL;
        for (Py_ssize_t i = 0; seq && PyList_Check(seq) && i < PyList_GET_SIZE(seq); i++) {
            int32_t w;
            if (read_int_list(seq, i, (int32_t)n, &w) < 0) return -1;
            if (vecs[v].n == vecs[v].cap) break; /* (room made by seq_sizes: a list grew meanwhile) */
            vecs[v].v[vecs[v].n++] = w;
        }
        if (!seq || !PyList_Check(seq) || vecs[v].n != PyList_GET_SIZE(seq)) {
            PyErr_Format(PyExc_RuntimeError, "insert_edges: %s changed while it was read", what);
            return -1;
        }
    }
    return 0;
}

/* The ints 0..k-1 made once and shared (node ids, ranks and positions: the contraction makes
 * and drops millions otherwise, and equal keys that are the same object compare at once). */
#define CE_INT_CACHE_MAX ((Py_ssize_t)1 << 20)
static PyObject **ce_ints;
static Py_ssize_t ce_ints_n;

static int ce_int_cache(Py_ssize_t n) {
    if (n > CE_INT_CACHE_MAX) n = CE_INT_CACHE_MAX;
    if (n <= ce_ints_n) return 0;
    PyObject **c = PyMem_RawRealloc(ce_ints, n * sizeof(PyObject *));
    if (!c) { PyErr_NoMemory(); return -1; }
    ce_ints = c;
    for (; ce_ints_n < n; ce_ints_n++) {
        PyObject *x = PyLong_FromSsize_t(ce_ints_n);
        if (!x) return -1;
        ce_ints[ce_ints_n] = x;
    }
    return 0;
}

static inline PyObject *ce_int(Py_ssize_t v) {
    if (v >= 0 && v < ce_ints_n) return Py_NewRef(ce_ints[v]);
    return PyLong_FromSsize_t(v);
}

static PyObject *int_list(const int32_t *v, Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = ce_int(v[i]); /* node ids and ranks: the shared ints where cached */
        if (!x) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* An OrderedSet's two halves for a sequence: (list of values, dict value -> position). */
static PyObject *seq_and_index(const int32_t *v, Py_ssize_t n) {
    PyObject *l = int_list(v, n), *d = l ? PyDict_New() : NULL;
    if (!d) { Py_XDECREF(l); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pos = ce_int(i);
        if (!pos || PyDict_SetItem(d, PyList_GET_ITEM(l, i), pos) < 0) {
            Py_XDECREF(pos); Py_DECREF(l); Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(pos);
    }
    PyObject *t = PyTuple_Pack(2, l, d);
    Py_DECREF(l);
    Py_DECREF(d);
    return t;
}

static PyObject *insert_edges(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *rank_l, *outs_l, *ins_l, *edges_o, *set_type = NULL;
    if (!PyArg_ParseTuple(args, "O!OOO|O!:insert_edges", &PyList_Type, &rank_l, &outs_l, &ins_l, &edges_o,
                          &PyType_Type, &set_type))
        return NULL;
    if (set_type) {
        learn_type_layout((PyTypeObject *)set_type);
        if ((PyObject *)os_type != set_type) {
            PyErr_SetString(PyExc_TypeError, "insert_edges: the set type must have __slots__ _seq and _idx");
            return NULL;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(rank_l);
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "insert_edges: too many nodes");
        return NULL;
    }
    PyObject *edges = PySequence_Fast(edges_o, "insert_edges: edges must be a sequence");
    if (!edges) return NULL;

    PyObject *result = NULL, *stop = NULL;
    int32_t *rank = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    uint8_t *visited = PyMem_RawCalloc(n ? n : 1, 1);
    Vec *outs = PyMem_RawCalloc(n ? n : 1, sizeof(Vec));
    Vec *ins = PyMem_RawCalloc(n ? n : 1, sizeof(Vec));
    Vec stack = {0}, deltaf = {0}, deltab = {0};
    int32_t *merged = NULL;
    Py_ssize_t merged_cap = 0;
    uint64_t *ta = NULL, *tb = NULL;
    Py_ssize_t tcap = 0;
    EdgeSet es = {0};
    int32_t *ex = NULL, *ey = NULL, *out_all = NULL, *in_all = NULL;
    Py_ssize_t *out_off = NULL, *in_off = NULL;
    PyObject *pending_type = NULL, *pending_value = NULL, *pending_tb = NULL; /* a malformed edge's error */
    if (!rank || !visited || !outs || !ins) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t v = 0; v < n; v++)
        if (read_int_list(rank_l, v, (int32_t)n, &rank[v]) < 0) goto done;
    int rank_bits = 1;
    while (rank_bits < 31 && ((Py_ssize_t)1 << rank_bits) < n) rank_bits++;

    Py_ssize_t m = PySequence_Fast_GET_SIZE(edges), existing = 0;

    /* the edges as C ints, read under the GIL; a malformed edge at index `limit` raises its
     * error only if the insertion gets there (as when each edge was read in its turn) */
    ex = PyMem_RawMalloc((m ? m : 1) * sizeof(int32_t));
    ey = PyMem_RawMalloc((m ? m : 1) * sizeof(int32_t));
    if (!ex || !ey) { PyErr_NoMemory(); goto done; }
    Py_ssize_t limit = m;
    PyObject **items = PySequence_Fast_ITEMS(edges);
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *pair = items[i];
        PyObject *px, *py;
        if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
            px = PyTuple_GET_ITEM(pair, 0);
            py = PyTuple_GET_ITEM(pair, 1);
        } else if (PyList_Check(pair) && PyList_GET_SIZE(pair) == 2) {
            px = PyList_GET_ITEM(pair, 0);
            py = PyList_GET_ITEM(pair, 1);
        } else {
            PyErr_SetString(PyExc_TypeError, "insert_edges: an edge must be an (x, y) pair");
            limit = i;
            break;
        }
        long xl = PyLong_AsLong(px), yl = PyLong_AsLong(py);
        if (PyErr_Occurred()) { limit = i; break; }
        if (xl < 0 || xl >= n || yl < 0 || yl >= n) {
            PyErr_SetString(PyExc_IndexError, "insert_edges: node id out of range");
            limit = i;
            break;
        }
        ex[i] = (int32_t)xl;
        ey[i] = (int32_t)yl;
    }
    if (limit < m) PyErr_Fetch(&pending_type, &pending_value, &pending_tb);

    /* every node's sequences in two arrays, each sized for what it holds plus the edges it may
     * get (a vector per node from the allocator cost 2-3 reallocations and its overhead each:
     * about 100 MB at 1M nodes) */
    if (seq_sizes(outs_l, n, "outs", &out_off) < 0 || seq_sizes(ins_l, n, "ins", &in_off) < 0) goto done;
    for (Py_ssize_t i = 0; i < limit; i++) {
        out_off[ex[i] + 1]++;
        in_off[ey[i] + 1]++;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        out_off[v + 1] += out_off[v];
        in_off[v + 1] += in_off[v];
    }
    out_all = PyMem_RawMalloc((out_off[n] ? out_off[n] : 1) * sizeof(int32_t));
    in_all = PyMem_RawMalloc((in_off[n] ? in_off[n] : 1) * sizeof(int32_t));
    if (!out_all || !in_all) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t v = 0; v < n; v++) {
        outs[v].v = out_all + out_off[v];
        outs[v].cap = out_off[v + 1] - out_off[v];
        ins[v].v = in_all + in_off[v];
        ins[v].cap = in_off[v + 1] - in_off[v];
    }
    if (load_seqs(outs_l, n, outs, "outs") < 0 || load_seqs(ins_l, n, ins, "ins") < 0) goto done;
    for (Py_ssize_t v = 0; v < n; v++) existing += outs[v].n;
    if (es_init(&es, (size_t)(existing + m + 16)) < 0) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t v = 0; v < n; v++)
        for (Py_ssize_t i = 0; i < outs[v].n; i++)
            if (es_add(&es, edge_key((int32_t)v, outs[v].v[i])) < 0) { PyErr_NoMemory(); goto done; }

    /* the insertion itself touches no Python object: other threads run meanwhile */
    Py_ssize_t stopped = limit; /* the edge that stopped it (limit: none did); -1: no memory */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < limit; i++) {
        int32_t x = ex[i], y = ey[i];
        if (x == y) {
            stopped = i;
            break;
        }
        int added = es_add(&es, edge_key(x, y));
        if (added < 0) { stopped = -1; break; }
        if (!added) continue; /* already there */
        outs[x].v[outs[x].n++] = y; /* (room made for it above) */
        ins[y].v[ins[y].n++] = x;
        int32_t rx = rank[x], ry = rank[y];
        if (rx <= ry) continue;

        /* forward: from y through ranks < rx; meeting x closes a cycle */
        int cycle = 0, nomem = 0;
        deltaf.n = 0;
        stack.n = 0;
        if (vec_push_nogil(&stack, y) < 0) { stopped = -1; break; }
        while (stack.n) {
            int32_t u = stack.v[--stack.n];
            if (visited[u]) continue;
            visited[u] = 1;
            if (vec_push_nogil(&deltaf, u) < 0) { nomem = 1; break; }
            const Vec *o = &outs[u];
            for (Py_ssize_t j = 0; j < o->n; j++) {
                int32_t w = o->v[j];
                if (w == x) { cycle = 1; break; }
                if (rank[w] < rx && !visited[w] && vec_push_nogil(&stack, w) < 0) { nomem = 1; break; }
            }
            if (cycle || nomem) break;
        }
        if (nomem) { stopped = -1; break; }
        if (cycle) {
            for (Py_ssize_t j = 0; j < deltaf.n; j++) visited[deltaf.v[j]] = 0;
            outs[x].n--; /* the edge was appended last to both sequences */
            ins[y].n--;
            stopped = i;
            break;
        }
        /* backward: from x through ranks > ry, skipping what the forward search marked */
        deltab.n = 0;
        stack.n = 0;
        if (vec_push_nogil(&stack, x) < 0) { stopped = -1; break; }
        while (stack.n) {
            int32_t u = stack.v[--stack.n];
            if (visited[u]) continue;
            visited[u] = 1;
            if (vec_push_nogil(&deltab, u) < 0) { nomem = 1; break; }
            const Vec *in = &ins[u];
            for (Py_ssize_t j = 0; j < in->n; j++) {
                int32_t w = in->v[j];
                if (rank[w] > ry && !visited[w] && vec_push_nogil(&stack, w) < 0) { nomem = 1; break; }
            }
            if (nomem) break;
        }
        if (nomem) { stopped = -1; break; }
        /* re-deal: deltab then deltaf, each in old-rank order, take the sorted union of ranks */
        if (sort_by_rank(deltab.v, deltab.n, rank, rank_bits, &ta, &tb, &tcap) < 0 ||
            sort_by_rank(deltaf.v, deltaf.n, rank, rank_bits, &ta, &tb, &tcap) < 0) {
            stopped = -1;
            break;
        }
        Py_ssize_t kb = deltab.n, kf = deltaf.n, k = kb + kf;
        if (merged_cap < k) {
            Py_ssize_t cap = 2 * k;
            int32_t *nm = PyMem_RawRealloc(merged, cap * sizeof(int32_t));
            if (!nm) { stopped = -1; break; }
            merged = nm;
            merged_cap = cap;
        }
        Py_ssize_t ib = 0, jf = 0, o = 0;
        while (ib < kb && jf < kf) {
            int32_t a = rank[deltab.v[ib]], b = rank[deltaf.v[jf]];
            if (a < b) { merged[o++] = a; ib++; } else { merged[o++] = b; jf++; }
        }
        while (ib < kb) merged[o++] = rank[deltab.v[ib++]];
        while (jf < kf) merged[o++] = rank[deltaf.v[jf++]];
        for (Py_ssize_t j = 0; j < kb; j++) {
            visited[deltab.v[j]] = 0;
            rank[deltab.v[j]] = merged[j];
        }
        for (Py_ssize_t j = 0; j < kf; j++) {
            visited[deltaf.v[j]] = 0;
            rank[deltaf.v[j]] = merged[kb + j];
        }
    }
    Py_END_ALLOW_THREADS
    if (stopped < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (stopped == limit && limit < m) { /* it got to the malformed edge: its error (the references given) */
        PyErr_Restore(pending_type, pending_value, pending_tb);
        pending_type = pending_value = pending_tb = NULL;
        goto done;
    }
    if (stopped < m) {
        stop = PyLong_FromSsize_t(stopped);
        if (!stop) goto done;
    }
    if (PyErr_Occurred()) goto done;
    if (!stop) stop = Py_NewRef(Py_None);
    if (ce_int_cache(n) < 0) goto done; /* one int object per node id, shared by every set */

    PyObject *r = int_list(rank, n), *ol = PyList_New(n), *il = PyList_New(n);
    if (!r || !ol || !il) {
        Py_XDECREF(r); Py_XDECREF(ol); Py_XDECREF(il);
        goto done;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        PyObject *a = seq_and_index(outs[v].v, outs[v].n), *b = a ? seq_and_index(ins[v].v, ins[v].n) : NULL;
        if (a && b && set_type) { /* the pairs as OrderedSets */
            PyObject *a2 = new_os((PyTypeObject *)set_type, Py_NewRef(PyTuple_GET_ITEM(a, 0)), Py_NewRef(PyTuple_GET_ITEM(a, 1)));
            PyObject *b2 = a2 ? new_os((PyTypeObject *)set_type, Py_NewRef(PyTuple_GET_ITEM(b, 0)), Py_NewRef(PyTuple_GET_ITEM(b, 1))) : NULL;
            Py_DECREF(a);
            Py_DECREF(b);
            a = a2;
            b = b2;
            if (!b) { Py_XDECREF(a); a = NULL; }
        }
        if (!a || !b) {
            Py_XDECREF(a); Py_XDECREF(b); Py_DECREF(r); Py_DECREF(ol); Py_DECREF(il);
            goto done;
        }
        PyList_SET_ITEM(ol, v, a);
        PyList_SET_ITEM(il, v, b);
    }
    result = Py_BuildValue("(ONNN)", stop, r, ol, il);

done:
    Py_XDECREF(stop);
    Py_DECREF(edges);
    Py_XDECREF(pending_type); /* (not raised: a failure before it, or an edge that stopped earlier) */
    Py_XDECREF(pending_value);
    Py_XDECREF(pending_tb);
    PyMem_RawFree(out_all); /* (every node's sequence lives in these two) */
    PyMem_RawFree(in_all);
    PyMem_RawFree(out_off);
    PyMem_RawFree(in_off);
    PyMem_RawFree(outs);
    PyMem_RawFree(ins);
    PyMem_RawFree(rank);
    PyMem_RawFree(visited);
    PyMem_RawFree(stack.v);
    PyMem_RawFree(deltaf.v);
    PyMem_RawFree(deltab.v);
    PyMem_RawFree(merged);
    PyMem_RawFree(ta);
    PyMem_RawFree(tb);
    PyMem_RawFree(es.slot);
    PyMem_RawFree(ex);
    PyMem_RawFree(ey);
    return result;
}

/* ------------------------------------------------------------------- the clone batch */

/* clone_batch(rank, outs, ins, tail, clones, work_limit, cheaper) -> (done, rank)
 *
 * graphcycles._CloneBatch.run in C (the Python form stays the reference; see its docstring for
 * why the result is TF's edge-by-edge one). rank: list of int; outs / ins: per node its
 * sequence (list of int) before the tail; tail: list of (x, y); clones: set of the clones.
 * Returns how many edges of the tail went in (the caller appends them to the sequences) and
 * the ranks after them; done 0 and rank None when the tail is not of the shape. Stops where a
 * check fails, or once its work passes work_limit or, divided by cheaper (0: never), what the
 * edge-by-edge insertion would have spent (the nodes it re-ranks). */

typedef struct {
    Py_ssize_t *off;
    int32_t *val;
} Csr;

static int csr_load(PyObject *lists, Py_ssize_t n, Csr *c) {
    c->off = NULL;
    c->val = NULL;
    if (!PyList_Check(lists) || PyList_GET_SIZE(lists) != n) {
        PyErr_SetString(PyExc_ValueError, "clone_batch: one sequence per node expected");
        return -1;
    }
    c->off = PyMem_RawMalloc((n + 1) * sizeof(Py_ssize_t));
    if (!c->off) { PyErr_NoMemory(); return -1; }
    c->off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *l = PyList_GET_ITEM(lists, i);
        if (!PyList_Check(l)) { PyErr_SetString(PyExc_TypeError, "clone_batch: sequences are lists"); return -1; }
        c->off[i + 1] = c->off[i] + PyList_GET_SIZE(l);
    }
    c->val = PyMem_RawMalloc((c->off[n] ? c->off[n] : 1) * sizeof(int32_t));
    if (!c->val) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *l = PyList_GET_ITEM(lists, i);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(l); j++) {
            long v = PyLong_AsLong(PyList_GET_ITEM(l, j));
            if (v == -1 && PyErr_Occurred()) return -1;
            if (v < 0 || v >= n) { PyErr_SetString(PyExc_ValueError, "clone_batch: node out of range"); return -1; }
            c->val[c->off[i] + j] = (int32_t)v;
        }
    }
    return 0;
}

static int heap_push(Vec *h, int32_t x) {
    if (vec_push(h, x) < 0) return -1;
    Py_ssize_t i = h->n - 1;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (h->v[p] <= x) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
    return 0;
}

static int32_t heap_pop(Vec *h) {
    int32_t top = h->v[0], x = h->v[--h->n];
    Py_ssize_t i = 0, n = h->n;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h->v[c + 1] < h->v[c]) c++;
        if (h->v[c] >= x) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = x;
    return top;
}

static inline void tree_set(int32_t *tree, Py_ssize_t size, Py_ssize_t i, int32_t val) {
    i += size;
    tree[i] = val;
    for (i >>= 1; i; i >>= 1) {
        int32_t l = tree[2 * i], r = tree[2 * i + 1], m = l < r ? l : r;
        if (tree[i] == m) break;
        tree[i] = m;
    }
}

static PyObject *clone_batch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *rank_l, *outs_l, *ins_l, *tail_l, *clones_o, *result = NULL;
    long long work_limit, cheaper;
    if (!PyArg_ParseTuple(args, "O!OOO!OLL:clone_batch", &PyList_Type, &rank_l, &outs_l, &ins_l, &PyList_Type,
                          &tail_l, &clones_o, &work_limit, &cheaper))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rank_l), T = PyList_GET_SIZE(tail_l);
    Csr out = {NULL, NULL}, in = {NULL, NULL};
    int32_t *R = NULL, *tx = NULL, *ty = NULL, *pos = NULL, *node_at = NULL, *seq = NULL, *fen = NULL;
    int32_t *latest = NULL, *tree = NULL, *maxpred = NULL, *placed = NULL, *seen = NULL, *nond = NULL;
    uint8_t *isclone = NULL, *held = NULL;
    Vec stack = {NULL, 0, 0}, heap = {NULL, 0, 0}, runs = {NULL, 0, 0};
    Py_ssize_t done = 0;

    R = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    tx = PyMem_RawMalloc((T ? T : 1) * sizeof(int32_t));
    ty = PyMem_RawMalloc((T ? T : 1) * sizeof(int32_t));
    pos = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    node_at = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    seq = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    fen = PyMem_RawCalloc(n + 1, sizeof(int32_t));
    latest = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    maxpred = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    placed = PyMem_RawMalloc((n ? n : 1) * sizeof(int32_t));
    nond = PyMem_RawCalloc(n ? n : 1, sizeof(int32_t));
    isclone = PyMem_RawCalloc(n ? n : 1, 1);
    held = PyMem_RawCalloc(n ? n : 1, 1);
    if (!R || !tx || !ty || !pos || !node_at || !seq || !fen || !latest || !maxpred || !placed || !nond || !isclone ||
        !held) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        long r = PyLong_AsLong(PyList_GET_ITEM(rank_l, v));
        if (r == -1 && PyErr_Occurred()) goto done;
        if (r < 0 || r >= n) { PyErr_SetString(PyExc_ValueError, "clone_batch: rank out of range"); goto done; }
        R[v] = (int32_t)r;
        pos[v] = -1;
        placed[v] = -1;
        maxpred[v] = -1;
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        PyObject *e = PyList_GET_ITEM(tail_l, t);
        long a, b;
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2) { PyErr_SetString(PyExc_TypeError, "clone_batch: (x, y) pairs"); goto done; }
        a = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        b = PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
        if (PyErr_Occurred()) goto done;
        if (a < 0 || a >= n || b < 0 || b >= n) { PyErr_SetString(PyExc_ValueError, "clone_batch: node out of range"); goto done; }
        tx[t] = (int32_t)a;
        ty[t] = (int32_t)b;
        for (int k = 0; k < 2; k++) {
            PyObject *o = PyTuple_GET_ITEM(e, k);
            int c = PySet_Contains(clones_o, o);
            if (c < 0) goto done;
            if (c) isclone[k ? b : a] = 1;
        }
    }
    if (csr_load(outs_l, n, &out) < 0 || csr_load(ins_l, n, &in) < 0) goto done;

    /* M: what the consumers reach */
    for (Py_ssize_t t = 0; t < T; t++)
        if (isclone[tx[t]] && pos[ty[t]] < 0) {
            pos[ty[t]] = 0;
            if (vec_push(&stack, ty[t]) < 0) goto done;
        }
    while (stack.n) {
        int32_t v = stack.v[--stack.n];
        for (Py_ssize_t j = out.off[v]; j < out.off[v + 1]; j++) {
            int32_t w = out.val[j];
            if (pos[w] < 0) {
                pos[w] = 0;
                if (vec_push(&stack, w) < 0) goto done;
            }
        }
    }
    for (Py_ssize_t t = 0; t < T; t++)
        if (!isclone[tx[t]] && pos[tx[t]] >= 0) { /* a clone's other input inside M */
            result = Py_BuildValue("(nO)", (Py_ssize_t)0, Py_None);
            goto done;
        }
    for (Py_ssize_t v = 0; v < n; v++) node_at[R[v]] = (int32_t)v;
    Py_ssize_t k = 0;
    for (Py_ssize_t s = 0; s < n; s++)
        if (pos[node_at[s]] >= 0) seq[k++] = node_at[s];
    for (Py_ssize_t i = 0; i < k; i++) {
        pos[seq[i]] = (int32_t)i;
        held[R[seq[i]]] = 1;
        fen[R[seq[i]] + 1] = 1;
    }
    for (Py_ssize_t i = 1; i <= n; i++) {
        Py_ssize_t j = i + (i & -i);
        if (j <= n) fen[j] += fen[i];
    }
    int32_t top_slot = k ? R[seq[k - 1]] : -1;
    Py_ssize_t log = 1;
    while (log * 2 <= n) log *= 2;
    for (Py_ssize_t i = 0; i < k; i++) {
        int32_t v = seq[i], m = -1;
        for (Py_ssize_t j = in.off[v]; j < in.off[v + 1]; j++)
            if (pos[in.val[j]] > m) m = pos[in.val[j]];
        latest[v] = m;
    }
    for (Py_ssize_t v = 0; v < n; v++)
        if (isclone[v])
            for (Py_ssize_t j = in.off[v]; j < in.off[v + 1]; j++)
                if (R[in.val[j]] > maxpred[v]) maxpred[v] = R[in.val[j]];
    Py_ssize_t size = 1;
    while (size < (k ? k : 1)) size *= 2;
    tree = PyMem_RawMalloc(2 * size * sizeof(int32_t));
    seen = PyMem_RawCalloc(size, sizeof(int32_t));
    if (!tree || !seen) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < size; i++) tree[size + i] = i < k ? latest[seq[i]] : INT32_MAX;
    for (Py_ssize_t i = size - 1; i > 0; i--) tree[i] = tree[2 * i] < tree[2 * i + 1] ? tree[2 * i] : tree[2 * i + 1];

    long long work = 0, reranked = 0, slack = n / 4;
    int32_t stamp = 0;
    for (Py_ssize_t t = 0; t < T; t++) {
        int32_t x = tx[t], y = ty[t];
        if (isclone[x]) {
            int32_t rc = R[x];
            if (placed[x] >= 0 || out.off[x + 1] != out.off[x] || rc <= top_slot || isclone[y] || pos[y] < 0) break;
            int32_t p = pos[y];
            Py_ssize_t want = p + 1, at = 0;
            for (Py_ssize_t step = log; step; step >>= 1) {
                Py_ssize_t nxt = at + step;
                if (nxt <= n && fen[nxt] < want) { at = nxt; want -= fen[nxt]; }
            }
            int32_t ry = (int32_t)at;
            if (maxpred[x] >= ry) break;
            stamp++;
            heap.n = 0;
            runs.n = 0;
            /* the work the edge-by-edge insertion would have spent, at most, with this clone */
            long long allowed = cheaper > 0 ? (reranked + (k - p) + slack) / cheaper : LLONG_MAX;
            int aborted = 0;
            /* the indices after p whose latest M predecessor is before p */
            stack.n = 0;
            if (vec_push(&stack, 1) < 0) goto done;
            while (stack.n) {
                int32_t node = stack.v[--stack.n];
                int32_t depth = 0;
                for (int32_t q = node; q > 1; q >>= 1) depth++;
                Py_ssize_t span = size >> depth, lo = (Py_ssize_t)(node - (1 << depth)) * span, hi = lo + span - 1;
                work++;
                if (hi <= p || tree[node] >= p) continue;
                if (lo == hi) {
                    seen[lo] = stamp;
                    if (heap_push(&heap, (int32_t)lo) < 0) goto done;
                    continue;
                }
                if (vec_push(&stack, 2 * node + 1) < 0 || vec_push(&stack, 2 * node) < 0) goto done;
            }
            while (heap.n) {
                int32_t i = heap_pop(&heap), w = seq[i];
                int ok = 1;
                for (Py_ssize_t j = in.off[w]; j < in.off[w + 1]; j++) {
                    int32_t u = in.val[j];
                    if (pos[u] >= p && nond[u] != stamp) { ok = 0; break; }
                }
                work += in.off[w + 1] - in.off[w] + 1;
                if (work > allowed || work > work_limit) { aborted = 1; break; }
                if (!ok) continue;
                nond[w] = stamp;
                if (vec_push(&runs, i) < 0) goto done;
                for (Py_ssize_t j = out.off[w]; j < out.off[w + 1]; j++) {
                    int32_t jj = pos[out.val[j]];
                    if (seen[jj] != stamp) {
                        seen[jj] = stamp;
                        if (heap_push(&heap, jj) < 0) goto done;
                    }
                }
            }
            if (aborted || work > allowed || work > work_limit) break;
            reranked += k - p - runs.n;
            /* each run of non-descendants swaps places with the D element before it */
            for (Py_ssize_t r = 0; r < runs.n;) {
                int32_t s0 = runs.v[r], e = s0;
                while (r + 1 < runs.n && runs.v[r + 1] == e + 1) { r++; e++; }
                r++;
                int32_t d = seq[s0 - 1];
                for (int32_t i = s0; i <= e; i++) {
                    int32_t w = seq[i];
                    seq[i - 1] = w;
                    pos[w] = i - 1;
                }
                seq[e] = d;
                pos[d] = e;
                work += e - s0 + 2;
                for (Py_ssize_t j = out.off[d]; j < out.off[d + 1]; j++) {
                    int32_t w2 = out.val[j];
                    if (latest[w2] < e) { latest[w2] = e; tree_set(tree, size, pos[w2], e); }
                }
                for (int32_t i = s0 - 1; i < e; i++) {
                    int32_t w = seq[i];
                    for (Py_ssize_t j = out.off[w]; j < out.off[w + 1]; j++) {
                        int32_t w2 = out.val[j];
                        if (latest[w2] == i + 1) {
                            int32_t m = -1;
                            for (Py_ssize_t q = in.off[w2]; q < in.off[w2 + 1]; q++)
                                if (pos[in.val[q]] > m) m = pos[in.val[q]];
                            latest[w2] = m;
                            if (pos[w2] < s0 - 1 || pos[w2] > e) tree_set(tree, size, pos[w2], m);
                        }
                    }
                }
                Py_ssize_t lo = size + s0 - 1, hi = size + e;
                for (Py_ssize_t i = lo; i <= hi; i++) tree[i] = latest[seq[i - size]];
                while (lo > 1) {
                    lo >>= 1;
                    hi >>= 1;
                    for (Py_ssize_t i = lo; i <= hi; i++)
                        tree[i] = tree[2 * i] < tree[2 * i + 1] ? tree[2 * i] : tree[2 * i + 1];
                }
            }
            for (Py_ssize_t i = (Py_ssize_t)ry + 1; i <= n; i += i & -i) fen[i]--;
            for (Py_ssize_t i = (Py_ssize_t)rc + 1; i <= n; i += i & -i) fen[i]++;
            held[ry] = 0;
            held[rc] = 1;
            top_slot = rc;
            placed[x] = ry;
        } else {
            int32_t rx = placed[x] >= 0 ? placed[x] : R[x], r2 = placed[y] >= 0 ? placed[y] : R[y];
            if (!isclone[y] || pos[x] >= 0 || rx >= r2) break;
            if (rx > maxpred[y]) maxpred[y] = rx;
        }
        done++;
    }
    {
        Py_ssize_t i = 0;
        for (Py_ssize_t s = 0; s < n; s++)
            if (held[s]) R[seq[i++]] = (int32_t)s;
        for (Py_ssize_t v = 0; v < n; v++)
            if (placed[v] >= 0) R[v] = placed[v];
        PyObject *rl = int_list(R, n);
        if (rl) {
            result = Py_BuildValue("(nN)", done, rl);
        }
    }
done:
    PyMem_RawFree(out.off); PyMem_RawFree(out.val); PyMem_RawFree(in.off); PyMem_RawFree(in.val);
    PyMem_RawFree(R); PyMem_RawFree(tx); PyMem_RawFree(ty); PyMem_RawFree(pos); PyMem_RawFree(node_at); PyMem_RawFree(seq);
    PyMem_RawFree(fen); PyMem_RawFree(latest); PyMem_RawFree(tree); PyMem_RawFree(maxpred); PyMem_RawFree(placed);
    PyMem_RawFree(seen); PyMem_RawFree(nond); PyMem_RawFree(isclone); PyMem_RawFree(held);
    PyMem_RawFree(stack.v); PyMem_RawFree(heap.v); PyMem_RawFree(runs.v);
    return result;
}

/* ------------------------------------------------------------ edge contraction */

/* contract_edge(rank, outs, ins, free, a, b) -> survivor or None
 *
 * GraphCycles.contract_edge in C (the Python form stays the reference), working in place on
 * GraphCycles' own state: rank (list of int), outs / ins (lists of OrderedSet: each a `_seq`
 * list and an `_idx` dict), free (list of int). Every step is the Python one: swap-remove
 * erasure, the rank-bounded searches with an explicit stack (successors pushed in sequence
 * order, marked when popped), the refused edge re-inserted at the end of both sequences, the
 * survivor the endpoint with more neighbours (a on a tie), the loser's successors then its
 * predecessors re-attached by Pearce-Kelly insertion, its slot pushed on the free list. The
 * visited flags are this module's scratch array (GraphCycles' own stay all False, as they
 * are between calls in Python). */

static uint8_t *ce_visited;
static Py_ssize_t ce_visited_cap;
static Vec ce_stack, ce_deltaf, ce_deltab;
static int32_t *ce_merged;
static Py_ssize_t ce_merged_cap;

typedef struct {
    PyObject *rank; /* list of int */
    PyObject *outs, *ins; /* lists of OrderedSet */
    Py_ssize_t n;
} CState;

/* The `_seq` list and `_idx` dict of outs[v] / ins[v] (borrowed: the OrderedSet holds them). */
static int os_parts(PyObject *sets, Py_ssize_t v, PyObject **seq, PyObject **idx) {
    PyObject *os = PyList_GET_ITEM(sets, v);
    PyObject *s, *d;
    if (Py_TYPE(os) != os_type) learn_os_layout(os);
    if (Py_TYPE(os) == os_type) {
        s = *(PyObject **)((char *)os + os_off_seq);
        d = *(PyObject **)((char *)os + os_off_idx);
        if (!s || !d) {
            PyErr_SetString(PyExc_AttributeError, "contract_edge: an OrderedSet without its list or dict");
            return -1;
        }
    } else {
        s = PyObject_GetAttr(os, str_seq);
        if (!s) return -1;
        d = PyObject_GetAttr(os, str_idx);
        if (!d) { Py_DECREF(s); return -1; }
        /* the OrderedSet keeps its own references */
        Py_DECREF(s);
        Py_DECREF(d);
    }
    if (!PyList_Check(s) || !PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "contract_edge: an OrderedSet must hold a list and a dict");
        return -1;
    }
    *seq = s;
    *idx = d;
    return 0;
}

static inline int get_int(PyObject *list, Py_ssize_t i, Py_ssize_t n, int32_t *out) {
    long v = PyLong_AsLong(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= n) {
        PyErr_SetString(PyExc_ValueError, "contract_edge: a node id or rank is out of range");
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static inline int rank_of(const CState *st, int32_t v, int32_t *r) { return get_int(st->rank, v, st->n, r); }

/* OrderedSet.insert of a value known to be absent: idx[v] = len(seq); seq.append(v). */
static int os_append(PyObject *seq, PyObject *idx, int32_t v) {
    PyObject *key = ce_int(v);
    if (!key) return -1;
    PyObject *pos = ce_int(PyList_GET_SIZE(seq));
    int rc = pos ? PyDict_SetItem(idx, key, pos) : -1;
    Py_XDECREF(pos);
    if (rc == 0) rc = PyList_Append(seq, key);
    Py_DECREF(key);
    return rc;
}

/* OrderedSet.erase: pos = idx.pop(v); last = seq.pop(); if last != v: seq[pos] = last, idx[last] = pos. */
static int os_erase(PyObject *seq, PyObject *idx, int32_t v) {
    PyObject *key = ce_int(v);
    if (!key) return -1;
    PyObject *pos = PyDict_GetItemWithError(idx, key);
    if (!pos) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
        Py_DECREF(key);
        return -1;
    }
    Py_INCREF(pos);
    Py_ssize_t p = PyLong_AsSsize_t(pos);
    Py_ssize_t k = PyList_GET_SIZE(seq);
    if ((p == -1 && PyErr_Occurred()) || PyDict_DelItem(idx, key) < 0) {
        Py_DECREF(pos);
        Py_DECREF(key);
        return -1;
    }
    Py_DECREF(key);
    if (k == 0 || p < 0 || p >= k) {
        Py_DECREF(pos);
        PyErr_SetString(PyExc_ValueError, "contract_edge: an OrderedSet's index does not match its sequence");
        return -1;
    }
    PyObject *last = PyList_GET_ITEM(seq, k - 1);
    Py_INCREF(last);
    if (PyList_SetSlice(seq, k - 1, k, NULL) < 0) {
        Py_DECREF(last);
        Py_DECREF(pos);
        return -1;
    }
    int rc = 0;
    long lv = PyLong_AsLong(last);
    if (lv == -1 && PyErr_Occurred()) rc = -1;
    else if (lv != v) {
        Py_INCREF(last);
        rc = PyList_SetItem(seq, p, last); /* steals the new reference, releases v's int */
        if (rc == 0) rc = PyDict_SetItem(idx, last, pos);
    }
    Py_DECREF(last);
    Py_DECREF(pos);
    return rc;
}

static int ce_reserve(Py_ssize_t n) {
    if (ce_visited_cap < n) {
        uint8_t *v = PyMem_RawRealloc(ce_visited, n);
        if (!v) { PyErr_NoMemory(); return -1; }
        memset(v + ce_visited_cap, 0, n - ce_visited_cap);
        ce_visited = v;
        ce_visited_cap = n;
    }
    return 0;
}

/* The rank-bounded forward search of _forward_dfs: collects into ce_deltaf the nodes reached
 * from `from` through ranks < upper; 1 when `target` is a successor of a reached node (stops
 * there), 0 when not, -1 on error. Visited flags of ce_deltaf are left set. */
static int forward(const CState *st, int32_t from, int32_t target, int32_t upper) {
    ce_deltaf.n = 0;
    ce_stack.n = 0;
    if (vec_push(&ce_stack, from) < 0) return -1;
    while (ce_stack.n) {
        int32_t u = ce_stack.v[--ce_stack.n];
        if (ce_visited[u]) continue;
        ce_visited[u] = 1;
        if (vec_push(&ce_deltaf, u) < 0) return -1;
        PyObject *seq, *idx;
        if (os_parts(st->outs, u, &seq, &idx) < 0) return -1;
        Py_ssize_t k = PyList_GET_SIZE(seq);
        Py_ssize_t mark = ce_stack.n;
        for (Py_ssize_t j = 0; j < k; j++) {
            int32_t w, rw;
            if (get_int(seq, j, st->n, &w) < 0) return -1;
            if (w == target) {
                ce_stack.n = mark;
                return 1;
            }
            if (ce_visited[w]) continue;
            if (rank_of(st, w, &rw) < 0) return -1;
            if (rw < upper && vec_push(&ce_stack, w) < 0) return -1;
        }
    }
    return 0;
}

static void clear_flags(const Vec *v) {
    for (Py_ssize_t j = 0; j < v->n; j++) ce_visited[v->v[j]] = 0;
}

/* The backward search of _backward_dfs into ce_deltab: ranks > lower, skipping marked nodes. */
static int backward(const CState *st, int32_t from, int32_t lower) {
    ce_deltab.n = 0;
    ce_stack.n = 0;
    if (vec_push(&ce_stack, from) < 0) return -1;
    while (ce_stack.n) {
        int32_t u = ce_stack.v[--ce_stack.n];
        if (ce_visited[u]) continue;
        ce_visited[u] = 1;
        if (vec_push(&ce_deltab, u) < 0) return -1;
        PyObject *seq, *idx;
        if (os_parts(st->ins, u, &seq, &idx) < 0) return -1;
        Py_ssize_t k = PyList_GET_SIZE(seq);
        for (Py_ssize_t j = 0; j < k; j++) {
            int32_t w, rw;
            if (get_int(seq, j, st->n, &w) < 0) return -1;
            if (ce_visited[w]) continue;
            if (rank_of(st, w, &rw) < 0) return -1;
            if (lower < rw && vec_push(&ce_stack, w) < 0) return -1;
        }
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort v's nodes by rank (read from the list; ranks are distinct). */
static int sort_nodes_by_rank(const CState *st, Vec *v, uint64_t **tmp, Py_ssize_t *cap) {
    if (v->n < 2) return 0;
    if (*cap < v->n) {
        uint64_t *t = PyMem_RawRealloc(*tmp, v->n * 2 * sizeof(uint64_t));
        if (!t) { PyErr_NoMemory(); return -1; }
        *tmp = t;
        *cap = v->n * 2;
    }
    for (Py_ssize_t j = 0; j < v->n; j++) {
        int32_t r;
        if (rank_of(st, v->v[j], &r) < 0) return -1;
        (*tmp)[j] = ((uint64_t)(uint32_t)r << 32) | (uint32_t)v->v[j];
    }
    qsort(*tmp, v->n, sizeof(uint64_t), cmp_u64);
    for (Py_ssize_t j = 0; j < v->n; j++) v->v[j] = (int32_t)((*tmp)[j] & 0xFFFFFFFFu);
    return 0;
}

static uint64_t *ce_tmp;
static Py_ssize_t ce_tmp_cap;

static int set_rank(const CState *st, int32_t v, int32_t r) {
    PyObject *x = ce_int(r);
    if (!x) return -1;
    return PyList_SetItem(st->rank, v, x); /* steals x, releases the old int */
}

/* GraphCycles.insert_edge(x, y): 1 inserted (or already there), 0 refused (closes a cycle). */
static int insert_edge_c(const CState *st, int32_t x, int32_t y) {
    if (x == y) return 0;
    PyObject *oseq, *oidx, *iseq, *iidx;
    if (os_parts(st->outs, x, &oseq, &oidx) < 0) return -1;
    PyObject *key = ce_int(y);
    if (!key) return -1;
    int has = PyDict_Contains(oidx, key);
    Py_DECREF(key);
    if (has < 0) return -1;
    if (has) return 1;
    if (os_parts(st->ins, y, &iseq, &iidx) < 0) return -1;
    if (os_append(oseq, oidx, y) < 0 || os_append(iseq, iidx, x) < 0) return -1;
    int32_t rx, ry;
    if (rank_of(st, x, &rx) < 0 || rank_of(st, y, &ry) < 0) return -1;
    if (rx <= ry) return 1;
    int found = forward(st, y, x, rx);
    if (found < 0) return -1;
    if (found) {
        clear_flags(&ce_deltaf);
        if (os_erase(oseq, oidx, y) < 0 || os_erase(iseq, iidx, x) < 0) return -1;
        return 0;
    }
    if (backward(st, x, ry) < 0) return -1;
    clear_flags(&ce_deltaf);
    clear_flags(&ce_deltab);
    if (sort_nodes_by_rank(st, &ce_deltab, &ce_tmp, &ce_tmp_cap) < 0 ||
        sort_nodes_by_rank(st, &ce_deltaf, &ce_tmp, &ce_tmp_cap) < 0)
        return -1;
    Py_ssize_t kb = ce_deltab.n, kf = ce_deltaf.n, k = kb + kf;
    if (ce_merged_cap < k) {
        int32_t *m = PyMem_RawRealloc(ce_merged, 2 * k * sizeof(int32_t));
        if (!m) { PyErr_NoMemory(); return -1; }
        ce_merged = m;
        ce_merged_cap = 2 * k;
    }
    /* the ranks held, in order: two ascending runs merged */
    Py_ssize_t ib = 0, jf = 0, o = 0;
    int32_t rb = 0, rf = 0;
    if (kb && rank_of(st, ce_deltab.v[0], &rb) < 0) return -1;
    if (kf && rank_of(st, ce_deltaf.v[0], &rf) < 0) return -1;
    while (ib < kb || jf < kf) {
        if (jf >= kf || (ib < kb && rb < rf)) {
            ce_merged[o++] = rb;
            if (++ib < kb && rank_of(st, ce_deltab.v[ib], &rb) < 0) return -1;
        } else {
            ce_merged[o++] = rf;
            if (++jf < kf && rank_of(st, ce_deltaf.v[jf], &rf) < 0) return -1;
        }
    }
    for (Py_ssize_t j = 0; j < kb; j++)
        if (set_rank(st, ce_deltab.v[j], ce_merged[j]) < 0) return -1;
    for (Py_ssize_t j = 0; j < kf; j++)
        if (set_rank(st, ce_deltaf.v[j], ce_merged[kb + j]) < 0) return -1;
    return 1;
}

/* Empty outs[v] / ins[v] in place (Python gives the node fresh OrderedSets; nothing holds the
 * old ones), its old sequence copied into `into` first. */
static int os_take(const CState *st, PyObject *sets, Py_ssize_t v, Vec *into) {
    PyObject *seq, *idx;
    if (os_parts(sets, v, &seq, &idx) < 0) return -1;
    Py_ssize_t k = PyList_GET_SIZE(seq);
    into->n = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        int32_t w;
        if (get_int(seq, j, st->n, &w) < 0 || vec_push(into, w) < 0) return -1;
    }
    if (PyList_SetSlice(seq, 0, k, NULL) < 0) return -1;
    PyDict_Clear(idx);
    return 0;
}

static Vec ce_bout, ce_bin;

static PyObject *contract_edge(PyObject *self, PyObject *args) {
    (void)self;
    CState st;
    PyObject *free_l;
    int a, b;
    if (!PyArg_ParseTuple(args, "O!O!O!O!ii:contract_edge", &PyList_Type, &st.rank, &PyList_Type, &st.outs,
                          &PyList_Type, &st.ins, &PyList_Type, &free_l, &a, &b))
        return NULL;
    st.n = PyList_GET_SIZE(st.rank);
    if (PyList_GET_SIZE(st.outs) != st.n || PyList_GET_SIZE(st.ins) != st.n) {
        PyErr_SetString(PyExc_ValueError, "contract_edge: per-node lists of different lengths");
        return NULL;
    }
    if (a < 0 || a >= st.n || b < 0 || b >= st.n) {
        PyErr_SetString(PyExc_IndexError, "contract_edge: node id out of range");
        return NULL;
    }
    if (ce_reserve(st.n) < 0 || ce_int_cache(st.n + 1) < 0) return NULL;
    PyObject *aoseq, *aoidx, *biseq, *biidx;
    if (os_parts(st.outs, a, &aoseq, &aoidx) < 0) return NULL;
    PyObject *key = ce_int(b);
    if (!key) return NULL;
    int has = PyDict_Contains(aoidx, key);
    Py_DECREF(key);
    if (has < 0) return NULL;
    if (!has) return PyErr_Format(PyExc_ValueError, "contract_edge: no edge %d -> %d", a, b);
    if (os_parts(st.ins, b, &biseq, &biidx) < 0) return NULL;
    if (os_erase(aoseq, aoidx, b) < 0 || os_erase(biseq, biidx, a) < 0) return NULL;

    /* is_reachable(a, b) */
    int32_t ra, rb;
    if (rank_of(&st, a, &ra) < 0 || rank_of(&st, b, &rb) < 0) return NULL;
    if (ra < rb) {
        int found = forward(&st, a, b, rb);
        clear_flags(&ce_deltaf);
        if (found < 0) return NULL;
        if (found) {
            if (insert_edge_c(&st, a, b) < 0) return NULL;
            Py_RETURN_NONE;
        }
    }
    PyObject *s1, *d1, *s2, *d2;
    if (os_parts(st.ins, b, &s1, &d1) < 0 || os_parts(st.outs, b, &s2, &d2) < 0) return NULL;
    Py_ssize_t nb = PyList_GET_SIZE(s1) + PyList_GET_SIZE(s2);
    if (os_parts(st.ins, a, &s1, &d1) < 0 || os_parts(st.outs, a, &s2, &d2) < 0) return NULL;
    Py_ssize_t na = PyList_GET_SIZE(s1) + PyList_GET_SIZE(s2);
    if (nb > na) { int t = a; a = b; b = t; } /* fold the node with fewer neighbours into the other */

    if (os_take(&st, st.outs, b, &ce_bout) < 0 || os_take(&st, st.ins, b, &ce_bin) < 0) return NULL;
    for (Py_ssize_t j = 0; j < ce_bout.n; j++) {
        PyObject *seq, *idx;
        if (os_parts(st.ins, ce_bout.v[j], &seq, &idx) < 0 || os_erase(seq, idx, b) < 0) return NULL;
    }
    for (Py_ssize_t j = 0; j < ce_bin.n; j++) {
        PyObject *seq, *idx;
        if (os_parts(st.outs, ce_bin.v[j], &seq, &idx) < 0 || os_erase(seq, idx, b) < 0) return NULL;
    }
    PyObject *bo = ce_int(b);
    if (!bo) return NULL;
    int rc = PyList_Append(free_l, bo);
    Py_DECREF(bo);
    if (rc < 0) return NULL;
    for (Py_ssize_t j = 0; j < ce_bout.n; j++)
        if (insert_edge_c(&st, a, ce_bout.v[j]) < 0) return NULL;
    for (Py_ssize_t j = 0; j < ce_bin.n; j++)
        if (insert_edge_c(&st, ce_bin.v[j], a) < 0) return NULL;
    return ce_int(a);
}

static PyMethodDef methods[] = {
    {"insert_edges", insert_edges, METH_VARARGS,
     "insert_edges(rank, outs, ins, edges[, set_type]) -> (stop, rank, outs, ins): GraphCycles.insert_edges in C;\n"
     "outs and ins: per node a (sequence list, index dict) pair, or a set_type instance holding them."},
    {"clone_batch", clone_batch, METH_VARARGS,
     "clone_batch(rank, outs, ins, tail, clones, work_limit, cheaper) -> (done, rank): graphcycles._CloneBatch in C."},
    {"contract_edge", contract_edge, METH_VARARGS,
     "contract_edge(rank, outs, ins, free, a, b) -> survivor or None: GraphCycles.contract_edge in C, in place."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastcycles",
                                    "C accelerator for jitsim.analyses.graphcycles.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastcycles(void) {
    str_seq = PyUnicode_InternFromString("_seq");
    str_idx = PyUnicode_InternFromString("_idx");
    if (!str_seq || !str_idx) return NULL;
    return PyModule_Create(&module);
}
