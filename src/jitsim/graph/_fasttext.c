/* Optional C accelerator for jitsim.graph.textproto (issue 14: reading and writing TF's text
 * GraphDefs at C speed).
 *
 * Two functions, each the C form of a pure-Python path that stays the reference:
 *
 *   print_wire(data, plan) -> str | None
 *       The text format of a message from its binary wire form, as textproto's _Printer
 *       prints it (field-number order, map entries sorted by key, TF's zero-key rules). The
 *       plan (built in textproto.py from the descriptors) says each field's name and kind;
 *       float and double values are printed by a Python callable in the plan so their digits
 *       come from one place. None: something this printer does not do (fields out of order,
 *       groups, a duplicate map key, invalid UTF-8...): the caller prints in Python instead.
 *
 *   encode_lines(text, fields, scalar) -> bytes | None
 *       The wire form of a message written one item a line (what TF and protobuf's printers
 *       write), as textproto's _line_items + _encode give it. Plain strings, enums, bools and
 *       decimal integers are encoded here, every other token by the Python callable
 *       ``scalar`` (textproto._scalar). None: the text leaves that layout (the caller then
 *       tries its other readers, which decide exactly as before).
 *
 * Neither raises for bad input: None is the answer, and Python decides what is wrong.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FALLBACK (-2) /* not an error: hand the job back to Python */
#define ERROR (-1)    /* a Python exception is set */
#define MAX_DEPTH 200

/* ----------------------------------------------------------------------------- buffer */

/* A float or double the printer met without the GIL: its digits (from the plan's Python
 * printer) go in at byte `at` of the text once the GIL is back. */
typedef struct {
    Py_ssize_t at;
    double d;
    PyObject *show; /* borrowed from the plan */
} LateFloat;

typedef struct {
    char *p;
    Py_ssize_t n, cap;
    PyThreadState *released; /* the printer's thread state while it runs without the GIL */
    int nomem;               /* out of memory without the GIL: MemoryError once it is taken again */
    LateFloat *late;         /* (while released) the floats to print afterwards, in text order */
    Py_ssize_t n_late, cap_late;
} Buf;

/* ERROR for "out of memory": MemoryError set, or noted where the GIL is not held. */
static int buf_nomem(Buf *b) {
    if (b->released) b->nomem = 1;
    else PyErr_NoMemory();
    return ERROR;
}

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->n + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra) cap *= 2;
    char *p = PyMem_RawRealloc(b->p, cap); /* (raw: callable without the GIL) */
    if (!p) return buf_nomem(b);
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return ERROR;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

static inline int buf_indent(Buf *b, int depth) {
    if (buf_reserve(b, 2 * depth) < 0) return ERROR;
    memset(b->p + b->n, ' ', 2 * depth);
    b->n += 2 * depth;
    return 0;
}

static int buf_put_bytesobj(Buf *b, PyObject *s) {
    return buf_put(b, PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s));
}

/* ------------------------------------------------------------------------------ wire */

static inline int read_varint(const unsigned char **pp, const unsigned char *end, uint64_t *out) {
    const unsigned char *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end) return FALLBACK;
        unsigned char c = *p++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return FALLBACK;
}

static int skip_field(const unsigned char **pp, const unsigned char *end, int wt) {
    uint64_t v;
    switch (wt) {
    case 0:
        return read_varint(pp, end, &v);
    case 1:
        if (end - *pp < 8) return FALLBACK;
        *pp += 8;
        return 0;
    case 2:
        if (read_varint(pp, end, &v) < 0 || v > (uint64_t)(end - *pp)) return FALLBACK;
        *pp += v;
        return 0;
    case 5:
        if (end - *pp < 4) return FALLBACK;
        *pp += 4;
        return 0;
    default:
        return FALLBACK; /* groups */
    }
}

/* ---------------------------------------------------------------------------- printer */

enum {
    P_STRING, P_BYTES, P_ENUM, P_BOOL, P_INT32, P_INT64, P_UINT32, P_UINT64, P_SINT32,
    P_SINT64, P_FIXED32, P_FIXED64, P_SFIXED32, P_SFIXED64, P_FLOAT, P_DOUBLE, P_MSG, P_MAP,
    P_COUNT
};
static const char *const print_kind_names[P_COUNT] = {
    "string", "bytes", "enum", "bool", "int32", "int64", "uint32", "uint64", "sint32",
    "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64", "float", "double", "message", "map"};

/* A field's spec in a plan: (name: bytes, kind: int, sub: list | None, names: dict | None,
 *                            show: callable | None, map: (key_spec, value_spec, zero_key, zero_value) | None).
 * A plan (a list: the spec of field number i at i, None for no field) is compiled once into
 * the C structs below (compile_plan), so that the printer reads no Python object and can run
 * without the GIL (a float's digits, which come from Python, are put in afterwards). */
typedef struct CPlan CPlan;

typedef struct {
    long long number;
    const char *name; /* UTF-8 of the plan's str (alive as long as the plan) */
    Py_ssize_t len;
} CEnum;

typedef struct CSpec {
    const char *name; /* the plan's bytes */
    Py_ssize_t name_len;
    int kind;
    CPlan *sub;             /* P_MSG: the message's plan (NULL: a type Python prints, sub None) */
    CEnum *enums;           /* P_ENUM: the value names, sorted by number (NULL: numbers) */
    Py_ssize_t n_enums;
    PyObject *show;         /* P_FLOAT, P_DOUBLE: the printer (borrowed: the plan holds it) */
    struct CSpec *key, *value; /* P_MAP */
    int zero_key, zero_value, map_printable;
} CSpec;

struct CPlan {
    Py_ssize_t n;
    CSpec **specs; /* NULL: no field of that number */
    int ok;        /* compiled completely (0: its compilation failed, or is under way) */
};

/* compiled plans, kept for the life of the process with a reference to their plan (textproto
 * makes one plan per message type and keeps it) */
typedef struct {
    PyObject *plan;
    CPlan *c;
} PlanEntry;
static PlanEntry *plan_cache;
static Py_ssize_t plan_cache_n, plan_cache_cap;

static CPlan *compile_plan(PyObject *plan);

static int enum_cmp(const void *a, const void *b) {
    long long x = ((const CEnum *)a)->number, y = ((const CEnum *)b)->number;
    return (x > y) - (x < y);
}

static int compile_spec(PyObject *t, CSpec *s) {
    memset(s, 0, sizeof *s);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6) {
        PyErr_SetString(PyExc_TypeError, "print plan: a field spec must be a 6-tuple");
        return ERROR;
    }
    PyObject *name = PyTuple_GET_ITEM(t, 0);
    if (!PyBytes_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "print plan: a field name must be bytes");
        return ERROR;
    }
    s->name = PyBytes_AS_STRING(name);
    s->name_len = PyBytes_GET_SIZE(name);
    s->kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
    if (s->kind < 0 || s->kind >= P_COUNT) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "print plan: bad field kind");
        return ERROR;
    }
    PyObject *sub = PyTuple_GET_ITEM(t, 2), *names = PyTuple_GET_ITEM(t, 3);
    PyObject *show = PyTuple_GET_ITEM(t, 4), *map = PyTuple_GET_ITEM(t, 5);
    if (s->kind == P_MSG) {
        if (sub != Py_None && !(s->sub = compile_plan(sub))) return ERROR;
    }
    if (s->kind == P_ENUM && names != Py_None) {
        if (!PyDict_Check(names)) {
            PyErr_SetString(PyExc_TypeError, "print plan: enum names must be a dict");
            return ERROR;
        }
        Py_ssize_t k = PyDict_GET_SIZE(names), pos = 0, i = 0;
        s->enums = PyMem_RawMalloc((k ? k : 1) * sizeof(CEnum));
        if (!s->enums) { PyErr_NoMemory(); return ERROR; }
        PyObject *num, *nm;
        while (PyDict_Next(names, &pos, &num, &nm)) {
            if (!PyLong_Check(num) || !PyUnicode_Check(nm)) {
                PyErr_SetString(PyExc_TypeError, "print plan: enum names must map int to str");
                return ERROR;
            }
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(num, &overflow);
            if (overflow) continue; /* never read from a 32-bit enum field */
            const char *u = PyUnicode_AsUTF8AndSize(nm, &s->enums[i].len);
            if (!u) return ERROR;
            s->enums[i].number = v;
            s->enums[i].name = u;
            i++;
        }
        s->n_enums = i;
        qsort(s->enums, i, sizeof(CEnum), enum_cmp);
    }
    if (s->kind == P_FLOAT || s->kind == P_DOUBLE) s->show = show;
    if (s->kind == P_MAP) {
        if (!PyTuple_Check(map) || PyTuple_GET_SIZE(map) != 4) {
            PyErr_SetString(PyExc_TypeError, "print plan: bad map spec");
            return ERROR;
        }
        s->key = PyMem_RawCalloc(2, sizeof(CSpec));
        if (!s->key) { PyErr_NoMemory(); return ERROR; }
        s->value = s->key + 1;
        if (compile_spec(PyTuple_GET_ITEM(map, 0), s->key) < 0 || compile_spec(PyTuple_GET_ITEM(map, 1), s->value) < 0)
            return ERROR;
        int zk = PyObject_IsTrue(PyTuple_GET_ITEM(map, 2)), zv = PyObject_IsTrue(PyTuple_GET_ITEM(map, 3));
        if (zk < 0 || zv < 0) return ERROR;
        s->zero_key = zk;
        s->zero_value = zv;
        int kk = s->key->kind, vk = s->value->kind;
        s->map_printable = !(kk == P_MSG || kk == P_MAP || kk == P_FLOAT || kk == P_DOUBLE || vk == P_MAP);
    }
    return 0;
}

/* The compiled form of plan (a list), made once; NULL with an exception set where the plan is
 * malformed (its half-made form stays cached, marked not ok: asked for again, it fails again). */
static int compiling; /* compile_plan calls under way (the GIL is held) */

static CPlan *compile_plan(PyObject *plan) {
    for (Py_ssize_t i = 0; i < plan_cache_n; i++) {
        if (plan_cache[i].plan != plan) continue;
        if (!plan_cache[i].c->ok && !compiling) {
            PyErr_SetString(PyExc_TypeError, "print plan: malformed (see the first error)");
            return NULL;
        }
        return plan_cache[i].c;
    }
    if (!PyList_Check(plan)) {
        PyErr_SetString(PyExc_TypeError, "print plan: a message plan must be a list");
        return NULL;
    }
    if (plan_cache_n == plan_cache_cap) {
        Py_ssize_t cap = plan_cache_cap ? 2 * plan_cache_cap : 16;
        PlanEntry *e = PyMem_RawRealloc(plan_cache, cap * sizeof(PlanEntry));
        if (!e) { PyErr_NoMemory(); return NULL; }
        plan_cache = e;
        plan_cache_cap = cap;
    }
    Py_ssize_t n = PyList_GET_SIZE(plan);
    CPlan *c = PyMem_RawCalloc(1, sizeof(CPlan));
    CSpec **specs = c ? PyMem_RawCalloc(n ? n : 1, sizeof(CSpec *)) : NULL;
    if (!specs) { PyMem_RawFree(c); PyErr_NoMemory(); return NULL; }
    c->n = n;
    c->specs = specs;
    /* cached before its fields: message types nest themselves */
    plan_cache[plan_cache_n].plan = Py_NewRef(plan);
    plan_cache[plan_cache_n].c = c;
    plan_cache_n++;
    compiling++;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(plan, i);
        if (t == Py_None) continue;
        CSpec *sp = PyMem_RawMalloc(sizeof(CSpec));
        if (!sp) { PyErr_NoMemory(); compiling--; return NULL; }
        specs[i] = sp;
        if (compile_spec(t, sp) < 0) { compiling--; return NULL; }
    }
    compiling--;
    c->ok = 1;
    return c;
}

static int wire_type_of(int kind) {
    switch (kind) {
    case P_STRING: case P_BYTES: case P_MSG: case P_MAP: return 2;
    case P_FIXED32: case P_SFIXED32: case P_FLOAT: return 5;
    case P_FIXED64: case P_SFIXED64: case P_DOUBLE: return 1;
    default: return 0;
    }
}

static int put_escaped(Buf *b, const unsigned char *s, Py_ssize_t n, int bytes) {
    /* protobuf's text_encoding.CEscape: as_utf8 for strings (bytes >= 0x80 kept), octal
     * escapes for everything non-printable in bytes fields. */
    if (buf_reserve(b, 4 * n + 2) < 0) return ERROR;
    char *o = b->p + b->n;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        switch (c) {
        case '\t': *o++ = '\\'; *o++ = 't'; continue;
        case '\n': *o++ = '\\'; *o++ = 'n'; continue;
        case '\r': *o++ = '\\'; *o++ = 'r'; continue;
        case '"': *o++ = '\\'; *o++ = '"'; continue;
        case '\'': *o++ = '\\'; *o++ = '\''; continue;
        case '\\': *o++ = '\\'; *o++ = '\\'; continue;
        default: break;
        }
        if ((c >= 32 && c < 127) || (c >= 128 && !bytes)) {
            *o++ = (char)c;
        } else {
            *o++ = '\\';
            *o++ = (char)('0' + ((c >> 6) & 7));
            *o++ = (char)('0' + ((c >> 3) & 7));
            *o++ = (char)('0' + (c & 7));
        }
    }
    *o++ = '"';
    b->n = o - b->p;
    return 0;
}

/* A decoded scalar: the integer kinds as int64/uint64, floats as double. */
typedef struct {
    int is_unsigned;
    int64_t i;
    uint64_t u;
    double d;
    const unsigned char *s; /* strings */
    Py_ssize_t len;
} Val;

static int read_scalar(const unsigned char **pp, const unsigned char *end, int kind, Val *v) {
    uint64_t raw;
    v->is_unsigned = 0;
    switch (kind) {
    case P_STRING: case P_BYTES:
        if (read_varint(pp, end, &raw) < 0 || raw > (uint64_t)(end - *pp)) return FALLBACK;
        v->s = *pp;
        v->len = (Py_ssize_t)raw;
        *pp += raw;
        return 0;
    case P_FIXED32: case P_SFIXED32: case P_FLOAT: {
        if (end - *pp < 4) return FALLBACK;
        uint32_t x;
        memcpy(&x, *pp, 4);
        *pp += 4;
        if (kind == P_FLOAT) { float f; memcpy(&f, &x, 4); v->d = (double)f; }
        else if (kind == P_FIXED32) { v->is_unsigned = 1; v->u = x; }
        else v->i = (int32_t)x;
        return 0;
    }
    case P_FIXED64: case P_SFIXED64: case P_DOUBLE: {
        if (end - *pp < 8) return FALLBACK;
        uint64_t x;
        memcpy(&x, *pp, 8);
        *pp += 8;
        if (kind == P_DOUBLE) memcpy(&v->d, &x, 8);
        else if (kind == P_FIXED64) { v->is_unsigned = 1; v->u = x; }
        else v->i = (int64_t)x;
        return 0;
    }
    default:
        if (read_varint(pp, end, &raw) < 0) return FALLBACK;
        switch (kind) {
        case P_INT32: case P_ENUM: v->i = (int32_t)(int64_t)raw; break;
        case P_INT64: v->i = (int64_t)raw; break;
        case P_UINT32: v->is_unsigned = 1; v->u = (uint32_t)raw; break;
        case P_UINT64: v->is_unsigned = 1; v->u = raw; break;
        case P_SINT32: { uint32_t r = (uint32_t)raw; v->i = (int32_t)((r >> 1) ^ (0u - (r & 1))); break; }
        case P_SINT64: v->i = (int64_t)((raw >> 1) ^ (0ull - (raw & 1))); break;
        case P_BOOL: v->is_unsigned = 1; v->u = raw != 0; break;
        default: return FALLBACK;
        }
        return 0;
    }
}

static int val_nonzero(int kind, const Val *v) {
    switch (kind) {
    case P_STRING: case P_BYTES: return v->len > 0;
    case P_FLOAT: case P_DOUBLE: return v->d != 0.0; /* nan != 0: true, as bool(nan) */
    default: return v->is_unsigned ? v->u != 0 : v->i != 0;
    }
}

/* d as the plan's printer `show` writes it (the GIL held); FALLBACK where it gives no str */
static int put_float(Buf *b, PyObject *show, double d) {
    PyObject *f = PyFloat_FromDouble(d);
    PyObject *t = f ? PyObject_CallOneArg(show, f) : NULL;
    Py_XDECREF(f);
    if (!t) return ERROR;
    int r = FALLBACK;
    if (PyUnicode_Check(t)) {
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(t, &len);
        r = u ? buf_put(b, u, len) : ERROR;
    }
    Py_DECREF(t);
    return r;
}

/* The text of a print made without the GIL, with its noted floats put in (the GIL held): their
 * digits are printed into a side buffer, then the text is widened in place, from its end (a
 * second copy of a big piece's text would double its memory). */
static int put_late_floats(Buf *b) {
    if (!b->n_late) return 0;
    Buf digits = {NULL, 0, 0};
    Py_ssize_t *ends = PyMem_RawMalloc(b->n_late * sizeof(Py_ssize_t)); /* each float's end in digits */
    if (!ends) return buf_nomem(b);
    int r = 0;
    for (Py_ssize_t i = 0; i < b->n_late && r == 0; i++) {
        r = put_float(&digits, b->late[i].show, b->late[i].d);
        ends[i] = digits.n;
    }
    if (r == 0) r = buf_reserve(b, digits.n);
    if (r == 0) {
        Py_ssize_t tail = b->n; /* the end of the text not yet moved */
        for (Py_ssize_t i = b->n_late - 1; i >= 0; i--) {
            Py_ssize_t at = b->late[i].at, start = i ? ends[i - 1] : 0, len = ends[i] - start;
            Py_ssize_t shift = ends[i]; /* the digits of floats 0..i go in before what follows `at` */
            memmove(b->p + at + shift, b->p + at, tail - at);
            memcpy(b->p + at + shift - len, digits.p + start, len);
            tail = at;
        }
        b->n += digits.n;
    }
    PyMem_RawFree(digits.p);
    PyMem_RawFree(ends);
    return r;
}

static int put_value(Buf *b, const CSpec *s, const Val *v) {
    char tmp[32];
    int n;
    switch (s->kind) {
    case P_STRING: return put_escaped(b, v->s, v->len, 0);
    case P_BYTES: return put_escaped(b, v->s, v->len, 1);
    case P_BOOL: return v->u ? buf_put(b, "true", 4) : buf_put(b, "false", 5);
    case P_FLOAT: case P_DOUBLE: { /* the plan's Python printer's digits */
        if (b->released) { /* no GIL to call it: noted, and put in once the GIL is back */
            if (b->n_late == b->cap_late) {
                Py_ssize_t cap = b->cap_late ? 2 * b->cap_late : 64;
                LateFloat *l = PyMem_RawRealloc(b->late, cap * sizeof(LateFloat));
                if (!l) return buf_nomem(b);
                b->late = l;
                b->cap_late = cap;
            }
            b->late[b->n_late].at = b->n;
            b->late[b->n_late].d = v->d;
            b->late[b->n_late].show = s->show;
            b->n_late++;
            return 0;
        }
        return put_float(b, s->show, v->d);
    }
    case P_ENUM:
        if (s->enums) {
            CEnum key = {v->i, NULL, 0};
            const CEnum *hit = bsearch(&key, s->enums, s->n_enums, sizeof(CEnum), enum_cmp);
            if (hit) return buf_put(b, hit->name, hit->len);
        }
        break;
    default: break;
    }
    if (v->is_unsigned) n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v->u);
    else n = snprintf(tmp, sizeof tmp, "%lld", (long long)v->i);
    return buf_put(b, tmp, n);
}

static int print_msg(Buf *b, const unsigned char *p, const unsigned char *end, const CPlan *plan,
                     int depth);

static int put_line_value(Buf *b, int depth, const CSpec *s, const Val *v) {
    if (buf_indent(b, depth) < 0 || buf_put(b, s->name, s->name_len) < 0 || buf_put(b, ": ", 2) < 0)
        return ERROR;
    int r = put_value(b, s, v);
    if (r < 0) return r;
    return buf_put(b, "\n", 1);
}

static int open_block(Buf *b, int depth, const char *name, Py_ssize_t len) {
    if (buf_indent(b, depth) < 0 || buf_put(b, name, len) < 0 || buf_put(b, " {\n", 3) < 0) return ERROR;
    return 0;
}

static int close_block(Buf *b, int depth) {
    if (buf_indent(b, depth) < 0 || buf_put(b, "}\n", 2) < 0) return ERROR;
    return 0;
}

typedef struct {
    Val key;
    int key_kind;
    const unsigned char *value; /* the value's bytes (a message, or a scalar's encoding) */
    const unsigned char *value_end;
    int has_value;
} Entry;

static int entry_cmp(const void *a, const void *b) {
    const Entry *ea = a;
    const Val *x = &ea->key, *y = &((const Entry *)b)->key;
    if (ea->key_kind == P_STRING || ea->key_kind == P_BYTES) {
        Py_ssize_t n = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->s, y->s, n);
        if (c) return c;
        return (x->len > y->len) - (x->len < y->len);
    }
    if (x->is_unsigned) return (x->u > y->u) - (x->u < y->u);
    return (x->i > y->i) - (x->i < y->i);
}

/* Print the run of map entries of one field starting at *pp (entries are contiguous). */
static int print_map(Buf *b, const unsigned char **pp, const unsigned char *end, const CSpec *s,
                     uint64_t tag, int depth) {
    if (!s->map_printable) return FALLBACK;
    const CSpec *ks = s->key, *vs = s->value;
    int kwt = wire_type_of(ks->kind), vwt = wire_type_of(vs->kind);

    Py_ssize_t cap = 16, n = 0;
    Entry *es = PyMem_RawMalloc(cap * sizeof(Entry));
    if (!es) return buf_nomem(b);
    int r = 0;
    const unsigned char *p = *pp;
    for (;;) {
        /* one entry: length-delimited */
        uint64_t len;
        if (read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p)) { r = FALLBACK; goto done; }
        const unsigned char *q = p, *qe = p + len;
        p = qe;
        if (n == cap) {
            cap *= 2;
            Entry *ne = PyMem_RawRealloc(es, cap * sizeof(Entry));
            if (!ne) { r = buf_nomem(b); goto done; }
            es = ne;
        }
        Entry *e = &es[n++];
        memset(e, 0, sizeof *e);
        e->key_kind = ks->kind;
        e->key.is_unsigned = ks->kind == P_UINT32 || ks->kind == P_UINT64 || ks->kind == P_FIXED32 ||
                             ks->kind == P_FIXED64 || ks->kind == P_BOOL;
        e->key.s = (const unsigned char *)"";
        while (q < qe) {
            uint64_t t;
            if (read_varint(&q, qe, &t) < 0) { r = FALLBACK; goto done; }
            int fn = (int)(t >> 3), wt = (int)(t & 7);
            if (t >> 3 > 2) fn = 3;
            if (fn == 1 && wt == kwt) {
                if (read_scalar(&q, qe, ks->kind, &e->key) < 0) { r = FALLBACK; goto done; }
            } else if (fn == 2 && wt == vwt) {
                const unsigned char *vstart = q;
                if (vs->kind == P_MSG) {
                    uint64_t vl;
                    if (read_varint(&q, qe, &vl) < 0 || vl > (uint64_t)(qe - q)) { r = FALLBACK; goto done; }
                    vstart = q;
                    q += vl;
                } else {
                    Val tmp;
                    if (read_scalar(&q, qe, vs->kind, &tmp) < 0) { r = FALLBACK; goto done; }
                }
                e->value = vstart;
                e->value_end = q;
                e->has_value = 1;
            } else if (fn == 1 || fn == 2) {
                r = FALLBACK; /* a key or value with the wrong wire type */
                goto done;
            } else if (skip_field(&q, qe, wt) < 0) { r = FALLBACK; goto done; }
        }
        /* the next field: another entry of this map? */
        const unsigned char *look = p;
        uint64_t next;
        if (look >= end || read_varint(&look, end, &next) < 0 || next != tag) break;
        p = look;
    }
    *pp = p;
    qsort(es, n, sizeof(Entry), entry_cmp);
    for (Py_ssize_t i = 1; i < n; i++) /* before printing: values may hold maps of their own */
        if (entry_cmp(&es[i - 1], &es[i]) == 0) { r = FALLBACK; goto done; } /* a duplicate key */
    for (Py_ssize_t i = 0; i < n; i++) {
        Entry *e = &es[i];
        if (open_block(b, depth, s->name, s->name_len) < 0) { r = ERROR; goto done; }
        if (s->zero_key || val_nonzero(ks->kind, &e->key)) {
            if ((r = put_line_value(b, depth + 1, ks, &e->key)) < 0) goto done;
        }
        if (vs->kind == P_MSG) {
            if (open_block(b, depth + 1, "value", 5) < 0) { r = ERROR; goto done; }
            if (e->has_value && (r = print_msg(b, e->value, e->value_end, vs->sub, depth + 2)) < 0)
                goto done;
            if (close_block(b, depth + 1) < 0) { r = ERROR; goto done; }
        } else {
            Val v;
            memset(&v, 0, sizeof v);
            v.s = (const unsigned char *)"";
            if (e->has_value) {
                const unsigned char *q = e->value;
                if (read_scalar(&q, e->value_end, vs->kind, &v) < 0) { r = FALLBACK; goto done; }
            } else {
                v.is_unsigned = vs->kind == P_UINT32 || vs->kind == P_UINT64 || vs->kind == P_FIXED32 ||
                                vs->kind == P_FIXED64 || vs->kind == P_BOOL;
            }
            if (s->zero_value || val_nonzero(vs->kind, &v)) {
                if ((r = put_line_value(b, depth + 1, vs, &v)) < 0) goto done;
            }
        }
        if (close_block(b, depth) < 0) { r = ERROR; goto done; }
    }
    r = 0;
done:
    PyMem_RawFree(es);
    return r;
}

/* plan NULL: a message type Python prints */
static int print_msg(Buf *b, const unsigned char *p, const unsigned char *end, const CPlan *plan,
                     int depth) {
    if (depth > MAX_DEPTH || plan == NULL) return FALLBACK;
    Py_ssize_t nspecs = plan->n;
    uint64_t last = 0;
    while (p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) < 0) return FALLBACK;
        uint64_t fn = tag >> 3;
        int wt = (int)(tag & 7);
        if (fn < last) return FALLBACK; /* not in field-number order: let Python sort it out */
        last = fn;
        const CSpec *s = fn < (uint64_t)nspecs ? plan->specs[fn] : NULL;
        if (s == NULL) { /* unknown field: ListFields leaves it out */
            if (skip_field(&p, end, wt) < 0) return FALLBACK;
            continue;
        }
        int want = wire_type_of(s->kind), r;
        if (s->kind == P_MAP) {
            if (wt != 2) return FALLBACK;
            if ((r = print_map(b, &p, end, s, tag, depth)) < 0) return r;
        } else if (s->kind == P_MSG) {
            uint64_t len;
            if (wt != 2 || read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p)) return FALLBACK;
            if (open_block(b, depth, s->name, s->name_len) < 0) return ERROR;
            if ((r = print_msg(b, p, p + len, s->sub, depth + 1)) < 0) return r;
            if (close_block(b, depth) < 0) return ERROR;
            p += len;
        } else if (wt == want) {
            Val v;
            if (read_scalar(&p, end, s->kind, &v) < 0) return FALLBACK;
            if ((r = put_line_value(b, depth, s, &v)) < 0) return r;
        } else if (wt == 2 && want != 2) { /* packed */
            uint64_t len;
            if (read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p)) return FALLBACK;
            const unsigned char *q = p, *qe = p + len;
            p = qe;
            while (q < qe) {
                Val v;
                if (read_scalar(&q, qe, s->kind, &v) < 0) return FALLBACK;
                if ((r = put_line_value(b, depth, s, &v)) < 0) return r;
            }
        } else {
            return FALLBACK;
        }
    }
    return 0;
}

static int all_ascii(const char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull) return 0;
    }
    for (; i < n; i++)
        if ((unsigned char)p[i] >= 0x80) return 0;
    return 1;
}

/* from this size on, print_wire gives up the GIL while it prints (below, that costs more than
 * it lets other threads do) */
#define PRINT_WITHOUT_GIL_BYTES (64 * 1024)

/* print_wire(data, plan[, as_bytes]) -> the text (str; as_bytes: its UTF-8 bytes), or None
 * where Python must print it (a field the plan leaves out, text that is not UTF-8) */
static PyObject *print_wire(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *plan;
    int as_bytes = 0;
    if (!PyArg_ParseTuple(args, "y*O|p:print_wire", &data, &plan, &as_bytes)) return NULL;
    Buf b = {NULL, 0, 0};
    const unsigned char *p = data.buf;
    int r;
    CPlan *c = plan == Py_None ? NULL : compile_plan(plan);
    if (plan != Py_None && c == NULL) {
        r = ERROR;
    } else if (data.len >= PRINT_WITHOUT_GIL_BYTES && data.readonly) {
        /* the bytes cannot change meanwhile; other threads run while it prints */
        b.released = PyEval_SaveThread();
        r = print_msg(&b, p, p + data.len, c, 0);
        PyEval_RestoreThread(b.released);
        b.released = NULL;
        if (r == ERROR && b.nomem) PyErr_NoMemory();
        if (r == 0) r = put_late_floats(&b);
        PyMem_RawFree(b.late);
    } else {
        r = print_msg(&b, p, p + data.len, c, 0);
    }
    PyBuffer_Release(&data);
    PyObject *out = NULL;
    if (r == 0 && as_bytes && all_ascii(b.p ? b.p : "", b.n)) { /* (ASCII is valid UTF-8: no str needed) */
        out = PyBytes_FromStringAndSize(b.p ? b.p : "", b.n);
    } else if (r == 0) {
        out = PyUnicode_DecodeUTF8(b.p ? b.p : "", b.n, "strict");
        if (out && as_bytes) {
            Py_SETREF(out, PyUnicode_AsUTF8String(out));
        }
        if (!out && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            out = Py_NewRef(Py_None);
        }
    } else if (r == FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    PyMem_RawFree(b.p);
    return out;
}

/* ---------------------------------------------------------------------------- encoder */

enum { K_STRING, K_BYTES, K_INT, K_ENUM, K_BOOL, K_FLOAT, K_DOUBLE, K_MSG, K_SINT, K_F32, K_F64 };

/* A field's entry in a parse table (dict name -> tuple):
 *   (tag: bytes, kind: int, sub: dict | None, enum: dict | None, lo: int, hi: int,
 *    once: int (field number, -1: repeated), oneof: int (index, -1: none), field: object) */

static inline int put_varint(Buf *b, uint64_t v) {
    if (buf_reserve(b, 10) < 0) return ERROR;
    char *o = b->p + b->n;
    while (v > 0x7F) {
        *o++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *o++ = (char)v;
    b->n = o - b->p;
    return 0;
}

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v > 0x7F) { v >>= 7; n++; }
    return n;
}

static inline int is_py_space(unsigned char c) {
    /* str.strip()'s ASCII whitespace (bytes >= 0x80 are checked by the caller) */
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

typedef struct {
    PyObject *fields;   /* this level's table */
    Py_ssize_t start;   /* where this message's content begins in the buffer */
    uint64_t once[4];   /* singular fields seen (numbers < 256) */
    uint64_t oneofs;    /* oneofs seen (index < 64) */
} Level;

static int mark_seen(Level *lv, long once, long oneof) {
    if (once >= 0) {
        if (once >= 256) return FALLBACK;
        uint64_t bit = 1ull << (once & 63);
        if (lv->once[once >> 6] & bit) return FALLBACK;
        if (oneof >= 0) {
            if (oneof >= 64 || (lv->oneofs & (1ull << oneof))) return FALLBACK;
            lv->oneofs |= 1ull << oneof;
        }
        lv->once[once >> 6] |= bit;
    }
    return 0;
}

static int parse_int(const char *s, Py_ssize_t n, long long *out) {
    /* -?(0|[1-9][0-9]*), at most 18 digits */
    Py_ssize_t i = 0;
    int neg = 0;
    if (n && s[0] == '-') { neg = 1; i = 1; }
    Py_ssize_t digits = n - i;
    if (digits < 1 || digits > 18) return FALLBACK;
    if (s[i] == '0' && digits > 1) return FALLBACK;
    long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return FALLBACK;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

/* The field entries (and enum values) found so far in this encode() call, by (table, name): a
 * text names the same few fields and enum values on most of its lines, and each dict lookup by
 * name makes a str and hashes it. The tables (and what they hold) stay alive and unchanged for
 * the call. */
#define MEMO_SLOTS 512
#define MEMO_NAME 32
typedef struct {
    PyObject *table;
    Py_ssize_t n;
    PyObject *value;
    char name[MEMO_NAME];
} Memo;

static inline Memo *memo_slot(Memo *memo, PyObject *table, const char *name, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ull ^ ((uintptr_t)table >> 4);
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211ull;
    return &memo[(h ^ (h >> 29)) & (MEMO_SLOTS - 1)];
}

static inline PyObject *memo_get(Memo *m, PyObject *table, const char *name, Py_ssize_t n) {
    return (m->table == table && m->n == n && !memcmp(m->name, name, n)) ? m->value : NULL;
}

static inline void memo_put(Memo *m, PyObject *table, const char *name, Py_ssize_t n, PyObject *value) {
    m->table = table;
    m->n = n;
    m->value = value;
    memcpy(m->name, name, n);
}

static int encode_scalar(Buf *b, PyObject *f, int kind, const char *tok, Py_ssize_t n,
                         PyObject *scalar, Memo *memo) {
    int quoted = tok[0] == '"' || tok[0] == '\'';
    if (kind == K_STRING || kind == K_BYTES) {
        if (!quoted) return FALLBACK;
        if (!memchr(tok + 1, '\\', n - 2)) {
            if (put_varint(b, (uint64_t)(n - 2)) < 0) return ERROR;
            return buf_put(b, tok + 1, n - 2);
        }
    } else if (quoted) {
        return FALLBACK;
    } else if (kind == K_ENUM) {
        PyObject *en = PyTuple_GET_ITEM(f, 3);
        Memo *m = n <= MEMO_NAME ? memo_slot(memo, en, tok, n) : NULL;
        PyObject *num = m ? memo_get(m, en, tok, n) : NULL;
        if (!num) {
            PyObject *key = PyUnicode_DecodeUTF8(tok, n, "strict");
            if (!key) { PyErr_Clear(); return FALLBACK; }
            num = PyDict_GetItemWithError(en, key);
            Py_DECREF(key);
            if (!num) return PyErr_Occurred() ? ERROR : FALLBACK;
            if (m) memo_put(m, en, tok, n, num);
        }
        long long v = PyLong_AsLongLong(num);
        if (v == -1 && PyErr_Occurred()) return ERROR;
        return put_varint(b, (uint64_t)v);
    } else if (kind == K_BOOL) {
        int v = -1;
        if ((n == 4 && !memcmp(tok, "true", 4)) || (n == 1 && (tok[0] == 't' || tok[0] == '1')) ||
            (n == 4 && !memcmp(tok, "True", 4)))
            v = 1;
        else if ((n == 5 && !memcmp(tok, "false", 5)) || (n == 1 && (tok[0] == 'f' || tok[0] == '0')) ||
                 (n == 5 && !memcmp(tok, "False", 5)))
            v = 0;
        if (v < 0) return FALLBACK;
        return buf_put(b, v ? "\x01" : "\x00", 1);
    } else if (kind == K_INT || kind == K_SINT) {
        long long v;
        if (parse_int(tok, n, &v) == 0) {
            long long lo = PyLong_AsLongLong(PyTuple_GET_ITEM(f, 4));
            long long hi = PyLong_AsLongLong(PyTuple_GET_ITEM(f, 5));
            if (PyErr_Occurred()) return ERROR;
            if (v < lo || v >= hi) return FALLBACK;
            if (kind == K_INT) return put_varint(b, (uint64_t)v);
            return put_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
        }
    }
    /* everything else: textproto._scalar(field, token) -> bytes, raising to fall back */
    PyObject *t = PyUnicode_DecodeUTF8(tok, n, "strict");
    if (!t) { PyErr_Clear(); return FALLBACK; }
    PyObject *enc = PyObject_CallFunctionObjArgs(scalar, PyTuple_GET_ITEM(f, 8), t, NULL);
    Py_DECREF(t);
    if (!enc || !PyBytes_Check(enc)) {
        Py_XDECREF(enc);
        PyErr_Clear(); /* _Fallback, or any refusal: Python's readers decide */
        return FALLBACK;
    }
    int r = buf_put_bytesobj(b, enc);
    Py_DECREF(enc);
    return r;
}

static PyObject *lookup_field(PyObject *fields, const char *name, Py_ssize_t n, int *r) {
    PyObject *key = PyUnicode_DecodeUTF8(name, n, "strict");
    if (!key) { PyErr_Clear(); *r = FALLBACK; return NULL; }
    PyObject *f = PyDict_GetItemWithError(fields, key);
    Py_DECREF(key);
    if (!f) { *r = PyErr_Occurred() ? ERROR : FALLBACK; return NULL; }
    if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 9) {
        PyErr_SetString(PyExc_TypeError, "parse table: a field entry must be a 9-tuple");
        *r = ERROR;
        return NULL;
    }
    return f;
}

static PyObject *lookup_field_memo(Memo *memo, PyObject *fields, const char *name, Py_ssize_t n, int *r) {
    if (n > MEMO_NAME) return lookup_field(fields, name, n, r);
    Memo *m = memo_slot(memo, fields, name, n);
    PyObject *f = memo_get(m, fields, name, n);
    if (f) return f;
    f = lookup_field(fields, name, n, r);
    if (f) memo_put(m, fields, name, n, f);
    return f;
}

static int encode(Buf *b, const char *text, Py_ssize_t len, PyObject *fields, PyObject *scalar) {
    Py_ssize_t cap = 16, depth = 0;
    Level *st = PyMem_Malloc(cap * sizeof(Level));
    if (!st) { PyErr_NoMemory(); return ERROR; }
    Memo *memo = PyMem_Calloc(MEMO_SLOTS, sizeof(Memo));
    if (!memo) { PyMem_Free(st); PyErr_NoMemory(); return ERROR; }
    memset(&st[0], 0, sizeof(Level));
    st[0].fields = fields;
    st[0].start = 0;
    int r = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', end - p);
        const char *le = nl ? nl : end;
        const char *s = p, *e = le;
        p = nl ? nl + 1 : end;
        while (s < e && is_py_space((unsigned char)*s)) s++;
        while (e > s && is_py_space((unsigned char)e[-1])) e--;
        if (s == e) continue;
        if ((unsigned char)*s >= 0x80 || (unsigned char)e[-1] >= 0x80) { r = FALLBACK; goto done; }
        Level *lv = &st[depth];
        if (e[-1] == '{') { /* "name {" */
            const char *ne = e - 1;
            while (ne > s && is_py_space((unsigned char)ne[-1])) ne--;
            PyObject *f = lookup_field_memo(memo, lv->fields, s, ne - s, &r);
            if (!f) goto done;
            if (PyLong_AsLong(PyTuple_GET_ITEM(f, 1)) != K_MSG) { r = FALLBACK; goto done; }
            if ((r = mark_seen(lv, PyLong_AsLong(PyTuple_GET_ITEM(f, 6)), PyLong_AsLong(PyTuple_GET_ITEM(f, 7)))) < 0)
                goto done;
            if (buf_put_bytesobj(b, PyTuple_GET_ITEM(f, 0)) < 0) { r = ERROR; goto done; }
            if (depth + 1 == cap) {
                if (cap >= 100000) { r = FALLBACK; goto done; }
                cap *= 2;
                Level *ns = PyMem_Realloc(st, cap * sizeof(Level));
                if (!ns) { PyErr_NoMemory(); r = ERROR; goto done; }
                st = ns;
            }
            depth++;
            memset(&st[depth], 0, sizeof(Level));
            st[depth].fields = PyTuple_GET_ITEM(f, 2);
            st[depth].start = b->n;
            if (!PyDict_Check(st[depth].fields)) { r = FALLBACK; goto done; }
            continue;
        }
        if (e - s == 1 && *s == '}') {
            if (depth == 0) { r = FALLBACK; goto done; }
            /* insert the content's length before it */
            Py_ssize_t start = st[depth].start, n = b->n - start;
            int vs = varint_size((uint64_t)n);
            if (buf_reserve(b, vs) < 0) { r = ERROR; goto done; }
            memmove(b->p + start + vs, b->p + start, n);
            uint64_t v = (uint64_t)n;
            char *o = b->p + start;
            while (v > 0x7F) { *o++ = (char)((v & 0x7F) | 0x80); v >>= 7; }
            *o = (char)v;
            b->n += vs;
            depth--;
            continue;
        }
        /* "name: value" */
        const char *sep = NULL;
        for (const char *q = s; q + 1 < e; q++)
            if (q[0] == ':' && q[1] == ' ') { sep = q; break; }
        if (!sep || sep + 2 == e) { r = FALLBACK; goto done; }
        const char *v = sep + 2;
        Py_ssize_t vn = e - v;
        char qc = *v;
        if (qc == '"' || qc == '\'') { /* exactly one complete string token */
            if (vn < 2 || v[vn - 1] != qc) { r = FALLBACK; goto done; }
            const char *q = v + 1, *qe = v + vn - 1;
            if (!memchr(q, '\\', qe - q)) {
                if (memchr(q, qc, qe - q)) { r = FALLBACK; goto done; }
            } else {
                /* "(?:[^"\\\n]|\\.)*" to the end */
                const char *x = v + 1;
                while (x < v + vn && *x != qc) x += (*x == '\\') ? 2 : 1;
                if (x != v + vn - 1) { r = FALLBACK; goto done; }
            }
        }
        PyObject *f = lookup_field_memo(memo, lv->fields, s, sep - s, &r);
        if (!f) goto done;
        int kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(f, 1));
        if (kind == K_MSG) { r = FALLBACK; goto done; }
        if ((r = mark_seen(lv, PyLong_AsLong(PyTuple_GET_ITEM(f, 6)), PyLong_AsLong(PyTuple_GET_ITEM(f, 7)))) < 0)
            goto done;
        if (buf_put_bytesobj(b, PyTuple_GET_ITEM(f, 0)) < 0) { r = ERROR; goto done; }
        if ((r = encode_scalar(b, f, kind, v, vn, scalar, memo)) < 0) goto done;
    }
    r = depth ? FALLBACK : 0;
done:
    PyMem_Free(st);
    PyMem_Free(memo);
    return r;
}

static PyObject *encode_lines(PyObject *self, PyObject *args) {
    PyObject *text, *fields, *scalar;
    if (!PyArg_ParseTuple(args, "OO!O:encode_lines", &text, &PyDict_Type, &fields, &scalar)) return NULL;
    Py_ssize_t n;
    const char *s;
    if (PyBytes_Check(text)) { /* UTF-8 text as read from a file (the caller checked it) */
        s = PyBytes_AS_STRING(text);
        n = PyBytes_GET_SIZE(text);
    } else if (PyUnicode_Check(text)) {
        s = PyUnicode_AsUTF8AndSize(text, &n);
        if (!s) { /* lone surrogates: Python's readers decide */
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    } else {
        PyErr_SetString(PyExc_TypeError, "encode_lines: text must be str or bytes");
        return NULL;
    }
    Buf b = {NULL, 0, 0};
    int r = encode(&b, s, n, fields, scalar);
    PyObject *out = NULL;
    if (r == 0) out = PyBytes_FromStringAndSize(b.p ? b.p : "", b.n);
    else if (r == FALLBACK) out = Py_NewRef(Py_None);
    PyMem_RawFree(b.p);
    return out;
}


/* Cut points of a message's wire bytes into pieces of about `target` bytes, each a run of
 * whole top-level records: printing the pieces one by one gives the whole message's text in
 * order (no piece starts inside a record). [0, ..., len(data)]; None: not well-formed, or
 * its fields not in field-number order (the printer would sort them across pieces). */
static PyObject *record_cuts(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t target;
    if (!PyArg_ParseTuple(args, "y*n:record_cuts", &data, &target)) return NULL;
    const unsigned char *start = data.buf, *p = start, *end = start + data.len, *piece = start;
    PyObject *cuts = PyList_New(0);
    int bad = 0;
    uint64_t last = 0;
    if (cuts) {
        PyObject *zero = PyLong_FromLong(0);
        if (!zero || PyList_Append(cuts, zero) < 0) bad = -1;
        Py_XDECREF(zero);
    }
    while (!bad && cuts && p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) < 0 || (tag >> 3) < last || skip_field(&p, end, (int)(tag & 7)) < 0) {
            bad = 1;
            break;
        }
        last = tag >> 3;
        if (p - piece >= target && p < end) {
            PyObject *at = PyLong_FromSsize_t(p - start);
            if (!at || PyList_Append(cuts, at) < 0) bad = -1;
            Py_XDECREF(at);
            piece = p;
        }
    }
    if (!bad && cuts) {
        PyObject *at = PyLong_FromSsize_t(data.len);
        if (!at || PyList_Append(cuts, at) < 0) bad = -1;
        Py_XDECREF(at);
    }
    PyBuffer_Release(&data);
    if (!cuts) return NULL;
    if (bad) {
        Py_DECREF(cuts);
        if (bad < 0) return NULL;
        Py_RETURN_NONE;
    }
    return cuts;
}

/* node_facts(data, names_and_inputs) -> (names, inputs, keys) | None: for a serialized GraphDef,
 * per node (field 1) in order: its name (field 1: the last one, as protobuf reads it) and its
 * inputs (field 3), as str (None for both unless names_and_inputs); and its key, the record less
 * the fields that name the node and its neighbours (name 1, input 3, device 4,
 * experimental_debug_info 6): the op, the attrs and any other field, as on the wire. What reading
 * ``name`` and ``input`` of each node of the parsed message gives, without making an object per
 * node; two nodes with equal keys have the same op and attrs (as serialized). None: not
 * well-formed, or a string that is not UTF-8. */
static PyObject *node_facts(PyObject *self, PyObject *args) {
    Py_buffer data;
    int want_strings = 1;
    if (!PyArg_ParseTuple(args, "y*|p:node_facts", &data, &want_strings)) return NULL;
    const unsigned char *p = data.buf, *end = p + data.len;
    PyObject *names = want_strings ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *inputs = want_strings ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *keys = PyList_New(0), *out = NULL;
    Buf b = {NULL, 0, 0};
    int bad = (names && inputs && keys) ? 0 : -1;
    while (!bad && p < end) {
        uint64_t tag, len;
        if (read_varint(&p, end, &tag) < 0) { bad = 1; break; }
        if (tag != ((1 << 3) | 2)) {
            if (skip_field(&p, end, (int)(tag & 7)) < 0) bad = 1;
            continue;
        }
        if (read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p)) { bad = 1; break; }
        const unsigned char *q = p, *qe = p + len;
        p = qe;
        PyObject *name = NULL, *ins = want_strings ? PyList_New(0) : NULL;
        if (want_strings && !ins) { bad = -1; break; }
        b.n = 0;
        while (q < qe) {
            const unsigned char *field = q;
            uint64_t t, n;
            if (read_varint(&q, qe, &t) < 0) { bad = 1; break; }
            uint64_t fn = t >> 3;
            if (want_strings && (fn == 1 || fn == 3) && (t & 7) == 2) {
                if (read_varint(&q, qe, &n) < 0 || n > (uint64_t)(qe - q)) { bad = 1; break; }
                PyObject *str = PyUnicode_DecodeUTF8((const char *)q, (Py_ssize_t)n, "strict");
                q += n;
                if (!str) {
                    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { PyErr_Clear(); bad = 1; }
                    else bad = -1;
                    break;
                }
                if (fn == 1) {
                    Py_XSETREF(name, str);
                } else {
                    int r = PyList_Append(ins, str);
                    Py_DECREF(str);
                    if (r < 0) { bad = -1; break; }
                }
                continue;
            }
            if (skip_field(&q, qe, (int)(t & 7)) < 0) { bad = 1; break; }
            if (fn == 1 || fn == 3 || fn == 4 || fn == 6) continue;
            if (buf_put(&b, (const char *)field, q - field) < 0) { bad = -1; break; }
        }
        if (!bad && want_strings) {
            if (!name) name = PyUnicode_FromStringAndSize("", 0);
            if (!name || PyList_Append(names, name) < 0 || PyList_Append(inputs, ins) < 0) bad = -1;
        }
        Py_XDECREF(name);
        Py_XDECREF(ins);
        if (!bad) {
            PyObject *key = PyBytes_FromStringAndSize(b.p ? b.p : "", b.n);
            if (!key || PyList_Append(keys, key) < 0) bad = -1;
            Py_XDECREF(key);
        }
    }
    PyBuffer_Release(&data);
    PyMem_RawFree(b.p);
    if (!bad) out = PyTuple_Pack(3, names, inputs, keys);
    Py_XDECREF(names);
    Py_XDECREF(inputs);
    Py_XDECREF(keys);
    if (bad > 0) Py_RETURN_NONE;
    return out;
}

/* ----------------------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"print_wire", print_wire, METH_VARARGS,
     "print_wire(data, plan) -> str | None: the text format of a message's wire bytes."},
    {"record_cuts", record_cuts, METH_VARARGS,
     "record_cuts(data, target) -> list[int] | None: offsets cutting wire bytes into runs of whole records."},
    {"node_facts", node_facts, METH_VARARGS,
     "node_facts(data[, names_and_inputs]) -> (names, inputs, keys) | None: per node of a serialized GraphDef."},
    {"encode_lines", encode_lines, METH_VARARGS,
     "encode_lines(text, fields, scalar) -> bytes | None: wire bytes of one-item-a-line text."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fasttext",
                                    "C accelerator for jitsim.graph.textproto.", -1, methods};

PyMODINIT_FUNC PyInit__fasttext(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *names = PyTuple_New(P_COUNT);
    if (!names) { Py_DECREF(m); return NULL; }
    for (int i = 0; i < P_COUNT; i++) PyTuple_SET_ITEM(names, i, PyUnicode_FromString(print_kind_names[i]));
    if (PyModule_AddObject(m, "PRINT_KINDS", names) < 0) { Py_DECREF(names); Py_DECREF(m); return NULL; }
    return m;
}
