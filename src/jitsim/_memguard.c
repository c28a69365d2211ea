/* Optional C helper for the jitsim command line (issue 39): a clean end when protobuf's C code
 * runs out of memory.
 *
 * protobuf's Python messages are upb's (google._upb._message), and upb does not check what its
 * allocator returns everywhere: where malloc fails (a limit such as `ulimit -v`, or a
 * machine without overcommit) the process dies with SIGSEGV (exit 139) instead of the
 * MemoryError Python raises for its own allocations. This module points that library's calls
 * of malloc, calloc and realloc (its PLT/GOT slots, found through dl_iterate_phdr and the
 * object's dynamic relocations) at wrappers that call the same functions and, where one
 * returns NULL for a non-empty request, end the process as jitsim's out-of-memory error does:
 * a reserve of address space is given back, the Python callback (the CLI's: its one error
 * line, the temporary files removed) runs when this thread holds the GIL, and the process exits
 * with code 2; where the callback cannot run or fails, the line given to install() is written
 * instead. Nothing else changes: every other allocation is the library's own.
 *
 *   install(fragments, line, callback) -> int
 *       Hook the loaded objects whose path contains one of ``fragments`` (bytes); returns the
 *       number of slots hooked (0 where this platform is not supported: Linux, x86-64 or
 *       AArch64, ELF64). ``line`` (bytes) is written where the callback cannot run or fails.
 *       Installing again replaces the line and callback.
 *   uninstall()         every slot back as it was, the reserve freed.
 *
 * Linux only; elsewhere install() hooks nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__) && defined(__LP64__) && (defined(__x86_64__) || defined(__aarch64__))
#define MEMGUARD_HOOKS 1
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#else
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#endif
#endif

#define MAX_SLOTS 64
#define MAX_FRAGMENTS 8
#define RESERVE_BYTES ((size_t)16 << 20)

typedef struct {
    void **slot;
    void *old;
    int relro; /* in the object's read-only-after-relocation range */
} Slot;

static Slot slots[MAX_SLOTS];
static int n_slots;
static char line[8192];
static size_t line_len;
static PyObject *callback; /* owned */
static void *reserve;
static volatile int failing;

static void set_line_bytes(const char *s, Py_ssize_t n) {
    if (n > (Py_ssize_t)sizeof(line)) n = sizeof(line);
    memcpy(line, s, (size_t)n);
    line_len = (size_t)n;
}

/* The allocation failed: end the process (never returns). */
static void out_of_memory(void) {
    if (!failing) {
        failing = 1;
        free(reserve); /* room for the callback's own allocations */
        reserve = NULL;
        if (callback != NULL && Py_IsInitialized() && PyGILState_Check()) {
            PyObject *r = PyObject_CallNoArgs(callback);
            if (r != NULL) {
                Py_DECREF(r);
                _exit(2);
            }
            PyErr_Clear();
        }
    }
    if (line_len) {
        ssize_t w = write(2, line, line_len);
        (void)w;
    }
    _exit(2);
}

static void *guard_malloc(size_t n) {
    void *p = malloc(n);
    if (p == NULL && n) out_of_memory();
    return p;
}

static void *guard_calloc(size_t k, size_t n) {
    void *p = calloc(k, n);
    if (p == NULL && k && n) out_of_memory();
    return p;
}

static void *guard_realloc(void *q, size_t n) {
    void *p = realloc(q, n);
    if (p == NULL && n) out_of_memory();
    return p;
}

#ifdef MEMGUARD_HOOKS

static int set_slot(void **slot, void *value, int relro) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)slot & ~(uintptr_t)(page - 1);
    if (relro && mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE) != 0) return -1;
    *slot = value;
    if (relro) mprotect((void *)start, (size_t)page, PROT_READ);
    return 0;
}

typedef struct {
    const char *fragments[MAX_FRAGMENTS];
    int n_fragments;
} Want;

static void *replacement(const char *name) {
    if (strcmp(name, "malloc") == 0) return (void *)guard_malloc;
    if (strcmp(name, "calloc") == 0) return (void *)guard_calloc;
    if (strcmp(name, "realloc") == 0) return (void *)guard_realloc;
    return NULL;
}

static void hook_relocs(uintptr_t base, const ElfW(Rela) *rel, size_t bytes, const ElfW(Sym) *symtab,
                        const char *strtab, uintptr_t relro_lo, uintptr_t relro_hi) {
    size_t n = bytes / sizeof(ElfW(Rela));
    for (size_t i = 0; i < n && n_slots < MAX_SLOTS; i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != R_JUMP_SLOT && type != R_GLOB_DAT) continue;
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
        void *value = replacement(strtab + sym->st_name);
        if (value == NULL) continue;
        void **slot = (void **)(base + rel[i].r_offset);
        int relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
        void *old = *slot;
        if (old == value) continue; /* hooked already */
        if (set_slot(slot, value, relro) == 0) {
            slots[n_slots].slot = slot;
            slots[n_slots].old = old;
            slots[n_slots].relro = relro;
            n_slots++;
        }
    }
}

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
    Want *want = (Want *)data;
    (void)size;
    if (info->dlpi_name == NULL || !info->dlpi_name[0]) return 0;
    int match = 0;
    for (int i = 0; i < want->n_fragments; i++)
        if (strstr(info->dlpi_name, want->fragments[i]) != NULL) match = 1;
    if (!match) return 0;
    uintptr_t base = (uintptr_t)info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = base + ph->p_vaddr;
            relro_hi = relro_lo + ph->p_memsz;
        }
    }
    if (dyn == NULL) return 0;
    uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltrelsz = 0, relasz = 0;
    long pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_JMPREL: jmprel = dyn->d_un.d_ptr; break;
        case DT_PLTRELSZ: pltrelsz = dyn->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
        case DT_RELA: rela = dyn->d_un.d_ptr; break;
        case DT_RELASZ: relasz = dyn->d_un.d_val; break;
        case DT_SYMTAB: symtab = dyn->d_un.d_ptr; break;
        case DT_STRTAB: strtab = dyn->d_un.d_ptr; break;
        default: break;
        }
    }
    /* glibc relocates these addresses in place; other loaders leave them relative */
#define ABS(p) ((p) != 0 && (p) < base ? (p) + base : (p))
    jmprel = ABS(jmprel);
    rela = ABS(rela);
    symtab = ABS(symtab);
    strtab = ABS(strtab);
#undef ABS
    if (symtab == 0 || strtab == 0) return 0;
    if (jmprel && pltrel == DT_RELA)
        hook_relocs(base, (const ElfW(Rela) *)jmprel, pltrelsz, (const ElfW(Sym) *)symtab, (const char *)strtab,
                    relro_lo, relro_hi);
    if (rela)
        hook_relocs(base, (const ElfW(Rela) *)rela, relasz, (const ElfW(Sym) *)symtab, (const char *)strtab,
                    relro_lo, relro_hi);
    return 0;
}

#endif /* MEMGUARD_HOOKS */

static void unhook(void) {
#ifdef MEMGUARD_HOOKS
    for (int i = n_slots - 1; i >= 0; i--) set_slot(slots[i].slot, slots[i].old, slots[i].relro);
#endif
    n_slots = 0;
}

static PyObject *install(PyObject *self, PyObject *args) {
    PyObject *fragments, *cb;
    const char *s;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy#O", &fragments, &s, &n, &cb)) return NULL;
    PyObject *seq = PySequence_Fast(fragments, "fragments: a sequence of bytes");
    if (seq == NULL) return NULL;
#ifdef MEMGUARD_HOOKS
    Want want;
    want.n_fragments = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && want.n_fragments < MAX_FRAGMENTS; i++) {
        PyObject *f = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(f)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "fragments: a sequence of bytes");
            return NULL;
        }
        want.fragments[want.n_fragments++] = PyBytes_AS_STRING(f);
    }
#endif
    unhook();
    set_line_bytes(s, n);
    Py_XDECREF(callback);
    callback = NULL;
    if (cb != Py_None) {
        Py_INCREF(cb);
        callback = cb;
    }
    failing = 0;
    if (reserve == NULL) reserve = malloc(RESERVE_BYTES);
#ifdef MEMGUARD_HOOKS
    dl_iterate_phdr(visit, &want);
#endif
    Py_DECREF(seq);
    return PyLong_FromLong(n_slots);
}

static PyObject *uninstall(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    unhook();
    free(reserve);
    reserve = NULL;
    Py_XDECREF(callback);
    callback = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_VARARGS,
     "install(fragments, line, callback) -> slots hooked: malloc/calloc/realloc of the objects named"},
    {"uninstall", uninstall, METH_NOARGS, "uninstall(): every hooked slot restored"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_memguard",
                                    "A clean end when protobuf's C code runs out of memory (issue 39).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__memguard(void) { return PyModule_Create(&module); }
