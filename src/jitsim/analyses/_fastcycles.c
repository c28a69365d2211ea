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
 * pair (list of values, dict value -> position): an OrderedSet's two halves.
 *
 * Which nodes are reached does not depend on the order of the search, and the ranks are
 * re-dealt in sorted order, so any complete search gives upstream's result; the sequences
 * only ever get appends (and one pop of the refused edge).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *v;
    Py_ssize_t n, cap;
} Vec;

static int vec_push(Vec *a, int32_t x) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 4;
        int32_t *v = PyMem_Realloc(a->v, cap * sizeof(int32_t));
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
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
    s->slot = PyMem_Calloc(cap, sizeof(uint64_t));
    if (!s->slot) {
        PyErr_NoMemory();
        return -1;
    }
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
    PyMem_Free(s->slot);
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
 * bits for long runs, insertion sort for short ones. */
static int sort_by_rank(int32_t *nodes, Py_ssize_t k, const int32_t *rank, int rank_bits,
                        uint64_t **tmp_a, uint64_t **tmp_b, Py_ssize_t *tmp_cap) {
    if (k < 2) return 0;
    if (*tmp_cap < k) {
        Py_ssize_t cap = k * 2;
        uint64_t *a = PyMem_Realloc(*tmp_a, cap * sizeof(uint64_t));
        if (!a) { PyErr_NoMemory(); return -1; }
        *tmp_a = a;
        uint64_t *b = PyMem_Realloc(*tmp_b, cap * sizeof(uint64_t));
        if (!b) { PyErr_NoMemory(); return -1; }
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
        static Py_ssize_t count[RADIX];
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

static int load_seqs(PyObject *lists, Py_ssize_t n, Vec *vecs, const char *what) {
    if (!PyList_Check(lists) || PyList_GET_SIZE(lists) != n) {
        PyErr_Format(PyExc_TypeError, "insert_edges: %s must be a list of %zd lists", what, n);
        return -1;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        PyObject *seq = PyList_GET_ITEM(lists, v);
        if (!PyList_Check(seq)) {
            PyErr_Format(PyExc_TypeError, "insert_edges: %s must be a list of lists", what);
            return -1;
        }
        Py_ssize_t k = PyList_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < k; i++) {
            int32_t w;
            if (read_int_list(seq, i, (int32_t)n, &w) < 0 || vec_push(&vecs[v], w) < 0) return -1;
        }
    }
    return 0;
}

static PyObject *int_list(const int32_t *v, Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
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
        PyObject *pos = PyLong_FromSsize_t(i);
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
    PyObject *rank_l, *outs_l, *ins_l, *edges_o;
    if (!PyArg_ParseTuple(args, "O!OOO:insert_edges", &PyList_Type, &rank_l, &outs_l, &ins_l, &edges_o))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rank_l);
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "insert_edges: too many nodes");
        return NULL;
    }
    PyObject *edges = PySequence_Fast(edges_o, "insert_edges: edges must be a sequence");
    if (!edges) return NULL;

    PyObject *result = NULL, *stop = NULL;
    int32_t *rank = PyMem_Malloc((n ? n : 1) * sizeof(int32_t));
    uint8_t *visited = PyMem_Calloc(n ? n : 1, 1);
    Vec *outs = PyMem_Calloc(n ? n : 1, sizeof(Vec));
    Vec *ins = PyMem_Calloc(n ? n : 1, sizeof(Vec));
    Vec stack = {0}, deltaf = {0}, deltab = {0};
    int32_t *merged = NULL;
    Py_ssize_t merged_cap = 0;
    uint64_t *ta = NULL, *tb = NULL;
    Py_ssize_t tcap = 0;
    EdgeSet es = {0};
    if (!rank || !visited || !outs || !ins) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t v = 0; v < n; v++)
        if (read_int_list(rank_l, v, (int32_t)n, &rank[v]) < 0) goto done;
    if (load_seqs(outs_l, n, outs, "outs") < 0 || load_seqs(ins_l, n, ins, "ins") < 0) goto done;
    int rank_bits = 1;
    while (rank_bits < 31 && ((Py_ssize_t)1 << rank_bits) < n) rank_bits++;

    Py_ssize_t m = PySequence_Fast_GET_SIZE(edges), existing = 0;
    for (Py_ssize_t v = 0; v < n; v++) existing += outs[v].n;
    if (es_init(&es, (size_t)(existing + m + 16)) < 0) goto done;
    for (Py_ssize_t v = 0; v < n; v++)
        for (Py_ssize_t i = 0; i < outs[v].n; i++)
            if (es_add(&es, edge_key((int32_t)v, outs[v].v[i])) < 0) goto done;

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
            goto done;
        }
        long xl = PyLong_AsLong(px), yl = PyLong_AsLong(py);
        if (PyErr_Occurred()) goto done;
        if (xl < 0 || xl >= n || yl < 0 || yl >= n) {
            PyErr_SetString(PyExc_IndexError, "insert_edges: node id out of range");
            goto done;
        }
        int32_t x = (int32_t)xl, y = (int32_t)yl;
        if (x == y) {
            stop = PyLong_FromSsize_t(i);
            break;
        }
        int added = es_add(&es, edge_key(x, y));
        if (added < 0) goto done;
        if (!added) continue; /* already there */
        if (vec_push(&outs[x], y) < 0 || vec_push(&ins[y], x) < 0) goto done;
        int32_t rx = rank[x], ry = rank[y];
        if (rx <= ry) continue;

        /* forward: from y through ranks < rx; meeting x closes a cycle */
        int cycle = 0;
        deltaf.n = 0;
        stack.n = 0;
        if (vec_push(&stack, y) < 0) goto done;
        while (stack.n) {
            int32_t u = stack.v[--stack.n];
            if (visited[u]) continue;
            visited[u] = 1;
            if (vec_push(&deltaf, u) < 0) goto done;
            const Vec *o = &outs[u];
            for (Py_ssize_t j = 0; j < o->n; j++) {
                int32_t w = o->v[j];
                if (w == x) { cycle = 1; break; }
                if (rank[w] < rx && !visited[w] && vec_push(&stack, w) < 0) goto done;
            }
            if (cycle) break;
        }
        if (cycle) {
            for (Py_ssize_t j = 0; j < deltaf.n; j++) visited[deltaf.v[j]] = 0;
            outs[x].n--; /* the edge was appended last to both sequences */
            ins[y].n--;
            stop = PyLong_FromSsize_t(i);
            break;
        }
        /* backward: from x through ranks > ry, skipping what the forward search marked */
        deltab.n = 0;
        stack.n = 0;
        if (vec_push(&stack, x) < 0) goto done;
        while (stack.n) {
            int32_t u = stack.v[--stack.n];
            if (visited[u]) continue;
            visited[u] = 1;
            if (vec_push(&deltab, u) < 0) goto done;
            const Vec *in = &ins[u];
            for (Py_ssize_t j = 0; j < in->n; j++) {
                int32_t w = in->v[j];
                if (rank[w] > ry && !visited[w] && vec_push(&stack, w) < 0) goto done;
            }
        }
        /* re-deal: deltab then deltaf, each in old-rank order, take the sorted union of ranks */
        if (sort_by_rank(deltab.v, deltab.n, rank, rank_bits, &ta, &tb, &tcap) < 0 ||
            sort_by_rank(deltaf.v, deltaf.n, rank, rank_bits, &ta, &tb, &tcap) < 0)
            goto done;
        Py_ssize_t kb = deltab.n, kf = deltaf.n, k = kb + kf;
        if (merged_cap < k) {
            Py_ssize_t cap = 2 * k;
            int32_t *nm = PyMem_Realloc(merged, cap * sizeof(int32_t));
            if (!nm) { PyErr_NoMemory(); goto done; }
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
    if (PyErr_Occurred()) goto done;
    if (!stop) stop = Py_NewRef(Py_None);

    PyObject *r = int_list(rank, n), *ol = PyList_New(n), *il = PyList_New(n);
    if (!r || !ol || !il) {
        Py_XDECREF(r); Py_XDECREF(ol); Py_XDECREF(il);
        goto done;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        PyObject *a = seq_and_index(outs[v].v, outs[v].n), *b = a ? seq_and_index(ins[v].v, ins[v].n) : NULL;
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
    if (outs) for (Py_ssize_t v = 0; v < n; v++) PyMem_Free(outs[v].v);
    if (ins) for (Py_ssize_t v = 0; v < n; v++) PyMem_Free(ins[v].v);
    PyMem_Free(outs);
    PyMem_Free(ins);
    PyMem_Free(rank);
    PyMem_Free(visited);
    PyMem_Free(stack.v);
    PyMem_Free(deltaf.v);
    PyMem_Free(deltab.v);
    PyMem_Free(merged);
    PyMem_Free(ta);
    PyMem_Free(tb);
    PyMem_Free(es.slot);
    return result;
}

static PyMethodDef methods[] = {
    {"insert_edges", insert_edges, METH_VARARGS,
     "insert_edges(rank, outs, ins, edges) -> (stop, rank, outs, ins): GraphCycles.insert_edges in C;\n"
     "outs and ins: per node a (sequence list, index dict) pair."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastcycles",
                                    "C accelerator for jitsim.analyses.graphcycles.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastcycles(void) { return PyModule_Create(&module); }
