/* The fixed part of every kiln glue (kiln/compiler/aot/glue.py): binding the compiled modules'
 * extern globals, the library's init / bind_extern / strerror functions, and what the
 * generated wrappers call. The glue defines before it: KILN_LIBRARY (the library's name), the
 * status macros, KILN_STRERROR_CASES, the `_kiln_externs` table and the BLAS tables, and, when
 * its functions print, debug_print.c (which defines KILN_BIND_DEFAULT_DEBUG_PRINT), and when
 * they call collectives across processes, glue_mpi.c (KILN_MPI_PROCESSES, _kiln_bind_mpi). */

KILN_API int KILN_EXPORT(_init)(void);

static void _kiln_set(const char *name, uint64_t value) {
    for (struct _kiln_extern *e = _kiln_externs; e->name; e++)
        if (strcmp(e->name, name) == 0) *e->slot = value;
}

static bool _kiln_used(const char *name) {
    for (struct _kiln_extern *e = _kiln_externs; e->name; e++)
        if (strcmp(e->name, name) == 0) return true;
    return false;
}

static int64_t _kiln_thread_count(void) {
    const char *setting = getenv("KILN_NUM_THREADS");
    if (setting && *setting) {
        char *end;
        long n = strtol(setting, &end, 10);
        if (*end == 0 && n >= 1 && n <= 1024) return n;
    }
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0)
        return CPU_COUNT(&cpus);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? online : 1;
}

/* Writes `pattern` with its {} replaced by `routine` into `out`. */
static bool _kiln_spell(char *out, size_t size, const char *pattern, const char *routine) {
    const char *hole = strstr(pattern, "{}");
    if (!hole) return false;
    int n = snprintf(out, size, "%.*s%s%s", (int)(hole - pattern), pattern, routine, hole + 2);
    return n > 0 && (size_t)n < size;
}

/* Sets an OpenBLAS in `library` to one thread: the library's pool runs the panels of a large
 * product as BLAS calls on its own threads. The setter's Fortran form (a pointer to an
 * INTEGER) is looked up under the recorded symbol, or the spellings of `patterns` that end
 * in an underscore (the Fortran ones); a BLAS without one is left as it is. */
static void _kiln_blas_one_thread(void *library, const char *const *patterns) {
    void *setter = NULL;
    char symbol[256];
    if (!patterns && _kiln_blas_setter) setter = dlsym(library, _kiln_blas_setter);
    for (int p = 0; patterns && patterns[p] && !setter; p++) {
        size_t length = strlen(patterns[p]);
        if (length && patterns[p][length - 1] == '_'
                && _kiln_spell(symbol, sizeof symbol, patterns[p], "openblas_set_num_threads"))
            setter = dlsym(library, symbol);
    }
    if (!setter) return;
    _kiln_blas_int one = 1;
    ((void (*)(_kiln_blas_int *))(uintptr_t)setter)(&one);
}

/* Looks the routines up in `library` (RTLD_DEFAULT: this process) under the spellings of
 * `patterns`, or under the recorded symbols when it is NULL; binds them and returns true when
 * every routine the code calls is found (nothing is bound otherwise). */
static bool _kiln_try_blas(void *library, const char *const *patterns) {
    enum { ROUTINES = sizeof _kiln_blas_routines / sizeof *_kiln_blas_routines };
    void *found[ROUTINES] = {NULL};
    char symbol[256];
    for (int k = 0; _kiln_blas_routines[k].name; k++) {
        if (!patterns && _kiln_blas_routines[k].symbol)
            found[k] = dlsym(library, _kiln_blas_routines[k].symbol);
        for (int p = 0; patterns && patterns[p] && !found[k]; p++)
            if (_kiln_spell(symbol, sizeof symbol, patterns[p], _kiln_blas_routines[k].routine))
                found[k] = dlsym(library, symbol);
        if (!found[k] && _kiln_used(_kiln_blas_routines[k].name)) return false;
    }
    for (int k = 0; _kiln_blas_routines[k].name; k++)
        if (found[k]) _kiln_set(_kiln_blas_routines[k].name, (uint64_t)(uintptr_t)found[k]);
    _kiln_blas_one_thread(library, patterns);
    return true;
}

static bool _kiln_try_blas_library(const char *path, const char *const *patterns) {
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) return false;
    if (_kiln_try_blas(library, patterns)) return true;
    dlclose(library);
    return false;
}

/* KILN_BLAS_LIBRARY=PATH, or PATH:PATTERN with {} in PATTERN standing for the routine. */
static bool _kiln_try_blas_env(void) {
    const char *setting = getenv("KILN_BLAS_LIBRARY");
    if (!setting || !*setting) return false;
    const char *colon = strrchr(setting, ':');
    if (!colon || !strstr(colon, "{}"))
        return _kiln_try_blas_library(setting, _kiln_blas_env_patterns);
    char path[4096];
    const char *patterns[] = {colon + 1, NULL};
    if ((size_t)(colon - setting) >= sizeof path) return false;
    memcpy(path, setting, colon - setting);
    path[colon - setting] = 0;
    return _kiln_try_blas_library(path, patterns);
}

/* Binds the BLAS routines from the first of: $KILN_BLAS_LIBRARY, the library recorded at
 * compile time, the routines already in the process, the system's BLAS libraries. */
static int _kiln_bind_blas(void) {
    bool needed = false;
    for (int k = 0; _kiln_blas_routines[k].name; k++)
        needed |= _kiln_used(_kiln_blas_routines[k].name);
    if (!needed || _kiln_try_blas_env()) return 0;
    if (_kiln_blas_path && _kiln_try_blas_library(_kiln_blas_path, NULL)) return 0;
    for (size_t k = 0; k < sizeof _kiln_blas_sources / sizeof *_kiln_blas_sources; k++) {
        const char *library = _kiln_blas_sources[k].library;
        if (library ? _kiln_try_blas_library(library, _kiln_blas_sources[k].patterns)
                    : _kiln_try_blas(RTLD_DEFAULT, _kiln_blas_sources[k].patterns))
            return 0;
    }
    return KILN_BLAS_UNBOUND;
}

static pthread_once_t _kiln_once = PTHREAD_ONCE_INIT;
static int _kiln_init_status;

static void _kiln_init_once(void) {
    _kiln_set("kiln_pthread_create", (uint64_t)(uintptr_t)&pthread_create);
    _kiln_set("kiln_pthread_join", (uint64_t)(uintptr_t)&pthread_join);
    _kiln_set("kiln_num_threads", (uint64_t)_kiln_thread_count());
    _kiln_set("kiln_syscall", (uint64_t)(uintptr_t)&syscall);
    _kiln_set("kiln_parallel_for", (uint64_t)(uintptr_t)&kiln_parallel_for);
    _kiln_set("kiln_run_tasks", (uint64_t)(uintptr_t)&kiln_run_tasks);
    _kiln_set("kiln_barrier_wait", (uint64_t)(uintptr_t)&kiln_barrier_wait);
    _kiln_set("kiln_gemm_float32", (uint64_t)(uintptr_t)&kiln_gemm_float32);
    _kiln_set("kiln_gemm_float64", (uint64_t)(uintptr_t)&kiln_gemm_float64);
    _kiln_set("kiln_fft_complex64", (uint64_t)(uintptr_t)&kiln_fft_complex64);
    _kiln_set("kiln_fft_complex128", (uint64_t)(uintptr_t)&kiln_fft_complex128);
#ifdef KILN_BIND_DEFAULT_DEBUG_PRINT
    KILN_BIND_DEFAULT_DEBUG_PRINT();
#endif
#ifdef KILN_MPI_PROCESSES
    _kiln_bind_mpi();
#endif
    _kiln_init_status = _kiln_bind_blas();
}

KILN_API int KILN_EXPORT(_init)(void) {
    pthread_once(&_kiln_once, _kiln_init_once);
    return _kiln_init_status;
}

__attribute__((constructor)) static void _kiln_constructor(void) {
    KILN_EXPORT(_init)();
}

KILN_API void KILN_EXPORT(_bind_extern)(const char *name, void *value) {
    KILN_EXPORT(_init)();
    if (name) _kiln_set(name, (uint64_t)(uintptr_t)value);
}

KILN_API const char *KILN_EXPORT(_strerror)(int code) {
    switch (code) {
    case 0: return "success";
KILN_STRERROR_CASES
    default:
        return code > KILN_ENTRY_STATUS_BASE
            ? "the compiled code failed (status: code - " KILN_STRING(KILN_ENTRY_STATUS_BASE) ")"
            : "unknown error code";
    }
}

static int _kiln_status(int32_t entry_status) {
    if (entry_status == 0) return 0;
    if (entry_status == KILN_ENTRY_OUT_OF_MEMORY) return KILN_OUT_OF_MEMORY;
    return KILN_ENTRY_STATUS_BASE + entry_status;
}

__attribute__((unused)) static void *_kiln_workspace(size_t bytes) {
    void *memory = NULL;
    size_t rounded = (bytes + 63) / 64 * 64;
    return posix_memalign(&memory, 64, rounded) == 0 ? memory : NULL;
}
