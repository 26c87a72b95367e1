/* The collectives across processes of a kiln glue (kiln/compiler/aot/glue.py), in libraries
 * whose functions call them (a pmap inside the compiled function, staged with
 * `kiln compile --processes N`). The MPI engine's library (kiln_mpi.o: mpi_engine.py) does
 * the work; this file gives it the caller's MPI: <NAME>_mpi_setup writes the engine's state
 * (MPI's functions, datatype and operation handles, a duplicate of the caller's communicator,
 * the timeout), as kiln.distributed does in Python. The glue defines before it: KILN_MPI_ENTRIES(X)
 * and KILN_MPI_CALLS(X) (X of each engine entry point, of each MPI function it calls), KILN_MPI_PROCESSES,
 * KILN_MPI_HANDLE_SIZE, KILN_MPI_SLOT_<name> (the state's slots), KILN_MPI_SLOTS,
 * KILN_MPI_DTYPES, KILN_MPI_OPS, KILN_MPI_TYPES (each dtype's MPI datatype),
 * KILN_MPI_OP_TABLE and KILN_MPI_OP_CODES (each dtype's operations: MPI's, where the code is 0;
 * else the code is KILN_MPI_NO_OP or kiln's float16 operation KILN_MPI_F16_OP(k)),
 * KILN_MPI_SIZES (each dtype's size), KILN_MPI_SHARED_DATA, _CHUNK and _REGION (the shared
 * window's layout: mpi_engine.SHARED_*) and the status macros KILN_MPI_SETUP_*. Processes all
 * on one node share a window (MPI_Win_allocate_shared) for large allreduces, as in Python,
 * unless KILN_DISTRIBUTED_SHARED_MEMORY is "0" (every process must see the same). */
#include <mpi.h>

_Static_assert(sizeof(MPI_Comm) == KILN_MPI_HANDLE_SIZE && sizeof(MPI_Datatype) ==
               KILN_MPI_HANDLE_SIZE && sizeof(MPI_Op) == KILN_MPI_HANDLE_SIZE,
               "the MPI compiled against has handles of another size than the one kiln's "
               "engine was compiled for (mpi4py's MPI)");

extern int64_t kiln_mpi_state[KILN_MPI_SLOTS];
#define KILN_MPI_DECLARE(name) extern void kiln_mpi_##name(void);
KILN_MPI_ENTRIES(KILN_MPI_DECLARE)
extern void kiln_mpi_f16_sum(void *, void *, int *, MPI_Datatype *),
    kiln_mpi_f16_max(void *, void *, int *, MPI_Datatype *),
    kiln_mpi_f16_min(void *, void *, int *, MPI_Datatype *);

#define KILN_MPI_NO_OP (-1)
#define KILN_MPI_F16_OP(k) (-2 - (k))

static MPI_Comm _kiln_mpi_comm = MPI_COMM_NULL, _kiln_mpi_node = MPI_COMM_NULL;
static MPI_Win _kiln_mpi_window = MPI_WIN_NULL;
static MPI_Op _kiln_mpi_f16_ops[KILN_MPI_OPS];
static int64_t _kiln_mpi_types[KILN_MPI_DTYPES], _kiln_mpi_ops[KILN_MPI_DTYPES * KILN_MPI_OPS];
static int64_t _kiln_mpi_sizes[KILN_MPI_DTYPES] = {KILN_MPI_SIZES};

/* A handle's bits in a state word (a pointer in Open MPI, an int in MPICH). */
static int64_t _kiln_mpi_word(const void *handle) {
    int64_t word = 0;
    memcpy(&word, handle, KILN_MPI_HANDLE_SIZE);
    return word;
}

static void _kiln_set(const char *name, uint64_t value);   /* (glue_runtime.c) */

/* The extern slots of the engine's entry points, in every compiled module that calls them. */
#define KILN_MPI_BIND(name) _kiln_set("kiln_mpi_" #name, (uint64_t)(uintptr_t)&kiln_mpi_##name);
static void _kiln_bind_mpi(void) { KILN_MPI_ENTRIES(KILN_MPI_BIND) }

#define KILN_MPI_SET(slot, value) (kiln_mpi_state[KILN_MPI_SLOT_##slot] = (int64_t)(value))
#define KILN_MPI_FUNCTION(name) KILN_MPI_SET(name, (uintptr_t)&MPI_##name);

KILN_API int KILN_EXPORT(_mpi_teardown)(void);

/* A barrier over `comm` polled against `timeout` seconds: KILN_MPI_SETUP_LATE (the engine's
 * state broken) when another process has not come by then. */
static int _kiln_mpi_arrive(MPI_Comm comm, double timeout) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Ibarrier(comm, &request) != MPI_SUCCESS) return KILN_MPI_SETUP_COMM;
    double start = MPI_Wtime();
    for (int done = 0; !done;) {
        if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return KILN_MPI_SETUP_COMM;
        if (!done && MPI_Wtime() - start > timeout) {
            KILN_MPI_SET(broken, 1);
            return KILN_MPI_SETUP_LATE;
        }
    }
    return 0;
}

/* Every process on one node (two or more): the window whose regions the engine stages its
 * allreduce in (mpi_engine._shared_window), its counters zeroed, the regions' table in the
 * state; nothing when the processes span several nodes. Barriers polled against the timeout
 * before and after (MPI's window calls have no nonblocking form). */
static int64_t _kiln_mpi_regions[KILN_MPI_PROCESSES];

static int _kiln_mpi_share(int rank, int size, double timeout) {
    KILN_MPI_SET(shared_regions, 0);
    const char *setting = getenv("KILN_DISTRIBUTED_SHARED_MEMORY");
    if (size < 2 || (setting && strcmp(setting, "0") == 0)) return 0;
    int late = _kiln_mpi_arrive(_kiln_mpi_comm, timeout);
    if (late) return late;
    int node_size = 0, unit = 0;
    if (MPI_Comm_split_type(_kiln_mpi_comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                            &_kiln_mpi_node) != MPI_SUCCESS ||
        MPI_Comm_size(_kiln_mpi_node, &node_size) != MPI_SUCCESS)
        return KILN_MPI_SETUP_COMM;
    if (node_size != size) return MPI_Comm_free(&_kiln_mpi_node) == MPI_SUCCESS ? 0 : KILN_MPI_SETUP_COMM;
    char *mine = NULL;
    MPI_Aint bytes = 0;
    if (MPI_Win_allocate_shared(KILN_MPI_SHARED_REGION, 1, MPI_INFO_NULL, _kiln_mpi_node, &mine,
                                &_kiln_mpi_window) != MPI_SUCCESS)
        return KILN_MPI_SETUP_COMM;
    for (int q = 0; q < size; q++) {   /* (the node's ranks are the communicator's) */
        char *region = NULL;
        if (MPI_Win_shared_query(_kiln_mpi_window, q, &bytes, &unit, &region) != MPI_SUCCESS)
            return KILN_MPI_SETUP_COMM;
        _kiln_mpi_regions[q] = (int64_t)(uintptr_t)region;
    }
    memset(mine, 0, KILN_MPI_SHARED_DATA);
    late = _kiln_mpi_arrive(_kiln_mpi_node, timeout);
    if (late) return late;
    KILN_MPI_SET(shared_regions, (uintptr_t)_kiln_mpi_regions);
    KILN_MPI_SET(shared_chunk, KILN_MPI_SHARED_CHUNK);
    return 0;
}

KILN_API int KILN_EXPORT(_mpi_setup)(MPI_Comm comm, double timeout) {
    int initialized = 0, size = 0, rank = 0;
    if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return KILN_MPI_SETUP_INIT;
    if (!(timeout > 0)) return KILN_MPI_SETUP_TIMEOUT;
    if (MPI_Comm_size(comm, &size) != MPI_SUCCESS || MPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        return KILN_MPI_SETUP_COMM;
    if (size != KILN_MPI_PROCESSES) return KILN_MPI_SETUP_SIZE;
    KILN_EXPORT(_mpi_teardown)();
    if (MPI_Comm_dup(comm, &_kiln_mpi_comm) != MPI_SUCCESS) return KILN_MPI_SETUP_COMM;
    void (*f16[KILN_MPI_OPS])(void *, void *, int *, MPI_Datatype *) = {
        kiln_mpi_f16_sum, kiln_mpi_f16_max, kiln_mpi_f16_min};
    for (int k = 0; k < KILN_MPI_OPS; k++)
        if (MPI_Op_create((MPI_User_function *)f16[k], 1, &_kiln_mpi_f16_ops[k]) != MPI_SUCCESS)
            return KILN_MPI_SETUP_COMM;
    MPI_Datatype types[KILN_MPI_DTYPES] = {KILN_MPI_TYPES};
    MPI_Op ops[KILN_MPI_DTYPES * KILN_MPI_OPS] = {KILN_MPI_OP_TABLE};
    int op_codes[KILN_MPI_DTYPES * KILN_MPI_OPS] = {KILN_MPI_OP_CODES};
    for (int k = 0; k < KILN_MPI_DTYPES; k++) _kiln_mpi_types[k] = _kiln_mpi_word(&types[k]);
    for (int k = 0; k < KILN_MPI_DTYPES * KILN_MPI_OPS; k++)
        _kiln_mpi_ops[k] = op_codes[k] == KILN_MPI_NO_OP ? 0
            : op_codes[k] <= KILN_MPI_F16_OP(0)
                ? _kiln_mpi_word(&_kiln_mpi_f16_ops[KILN_MPI_F16_OP(0) - op_codes[k]])
                : _kiln_mpi_word(&ops[k]);
    KILN_MPI_CALLS(KILN_MPI_FUNCTION)
    KILN_MPI_SET(malloc, (uintptr_t)&malloc);
    KILN_MPI_SET(free, (uintptr_t)&free);
    KILN_MPI_SET(sched_yield, (uintptr_t)&sched_yield);
    void *in_place = MPI_IN_PLACE;
    KILN_MPI_SET(in_place, (uintptr_t)in_place);
    KILN_MPI_SET(types, (uintptr_t)_kiln_mpi_types);
    KILN_MPI_SET(ops, (uintptr_t)_kiln_mpi_ops);
    KILN_MPI_SET(sizes, (uintptr_t)_kiln_mpi_sizes);
    KILN_MPI_SET(status_size, sizeof(MPI_Status));
    KILN_MPI_SET(rank, rank);
    KILN_MPI_SET(size, size);
    memcpy(&kiln_mpi_state[KILN_MPI_SLOT_timeout], &timeout, sizeof timeout);
    KILN_MPI_SET(broken, 0);
    int shared = _kiln_mpi_share(rank, size, timeout);
    if (shared) return shared;
    kiln_mpi_state[KILN_MPI_SLOT_comm] = _kiln_mpi_word(&_kiln_mpi_comm);
    return 0;
}

KILN_API int KILN_EXPORT(_mpi_teardown)(void) {
    if (_kiln_mpi_comm == MPI_COMM_NULL) return 0;
    kiln_mpi_state[KILN_MPI_SLOT_comm] = 0;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return 0;
    KILN_MPI_SET(shared_regions, 0);
    if (_kiln_mpi_window != MPI_WIN_NULL && !kiln_mpi_state[KILN_MPI_SLOT_broken]) {
        MPI_Win_free(&_kiln_mpi_window);   /* (collective: not after a process stopped) */
        MPI_Comm_free(&_kiln_mpi_node);
    }
    for (int k = 0; k < KILN_MPI_OPS; k++) MPI_Op_free(&_kiln_mpi_f16_ops[k]);
    return MPI_Comm_free(&_kiln_mpi_comm) == MPI_SUCCESS ? 0 : KILN_MPI_SETUP_COMM;
}

/* What the wrappers of functions calling collectives across processes check. */
static bool _kiln_mpi_ready(void) { return kiln_mpi_state[KILN_MPI_SLOT_comm] != 0; }
static bool _kiln_mpi_broken(void) { return kiln_mpi_state[KILN_MPI_SLOT_broken] != 0; }
