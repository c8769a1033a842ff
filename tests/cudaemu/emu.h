// cudaemu internals shared by the runtime (runtime.cpp, kernel.cpp), the cuBLASLt
// emulation (cublaslt.cpp) and the NCCL emulation (nccl.cpp). C++17, test code only.
//
// Model: every stream is a queue executed in order by its own host thread; an operation
// ("op": a kernel grid, a copy, a cuBLASLt product, an NCCL collective, a host function)
// is a closure run on that thread. Ordering between streams exists only where the program
// creates it (events, stream waits, host synchronisation, the legacy stream's implicit
// syncs); the checker computes that happens-before relation with vector clocks at enqueue
// time and checks every op's device-memory footprint against the footprints of ops on
// other streams that are not ordered with it. Unordered conflicting accesses, reads of
// never-written device memory and host accesses to page-locked memory an unfinished copy
// uses are violations: reported with both operations named, exit code 86.
#ifndef ZT_CUDAEMU_EMU_H
#define ZT_CUDAEMU_EMU_H
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>

namespace zt_emu {

enum { EXIT_VIOLATION = 86 };

// ---- memory -------------------------------------------------------------------------------
enum mem_kind { MEM_NONE = 0, MEM_DEVICE = 1, MEM_PINNED = 2, MEM_REGISTERED = 3 };
struct mem_info {
    char *base;       // start of the allocation (as the program sees it)
    size_t size;      // bytes requested
    int kind;         // mem_kind
    int device;       // owning device (MEM_DEVICE), -1 otherwise
    uint64_t id;      // allocation number (diagnostics)
};
// The live allocation containing p (kind MEM_NONE when p is in none).
mem_info mem_lookup(const void *p);
// [p, p + bytes) inside one live device allocation (of `device`, or of any device if < 0).
bool is_device_range(const void *p, size_t bytes, int device);
// The emulator's own view of page-locked host memory (the program's view may be
// protected while a copy is in flight); identity for every other pointer.
void *device_view(const void *p);

// ---- devices and streams --------------------------------------------------------------------
int current_device();                 // of the calling host thread
int stream_device(cudaStream_t s);    // device of s (NULL: the current device); -1 if s is invalid
const char *stream_name(cudaStream_t s);

// Enqueue `run` on stream s (NULL: the legacy default stream of the current device). `what`,
// `file`, `line` name the work in diagnostics (a kernel name, "cublasLtMatmul",
// "ncclAllGather" and the caller's site). Returns cudaSuccess, or the error of an invalid
// stream or the context's sticky error (then run is not enqueued). `run` executes on the
// stream's thread after everything the stream must wait for; it returns cudaSuccess or a
// device-side error that becomes the context's sticky error (see device_fault).
cudaError_t enqueue(cudaStream_t s, const char *what, const char *file, int line,
                    std::function<cudaError_t()> run);

// The same, naming the program's call site: `caller` is the return address of the public
// API function (__builtin_return_address(0) there), which diagnostics symbolise.
cudaError_t enqueue_from(cudaStream_t s, const char *what, const char *file, int line, const void *caller,
                         std::function<cudaError_t()> run);

// Inside run: declare the device memory an op touches with code that is not compiled with
// the emulator's access instrumentation (instrumented code, e.g. kernels, is recorded
// automatically). Each call checks bounds (the range must lie inside one live allocation,
// else an illegal-address fault is reported), initialisation (reading bytes never written:
// violation) and, when the op ends, ordering against other streams (violation). Declare
// before touching the memory.
void record_read(const void *p, size_t bytes);
void record_write(void *p, size_t bytes);
// A range outside every live allocation is a device fault: record_* report it and throw
// this to the stream thread's op runner, which ends the op (the fault is the context's
// sticky error). Code inside run that catches exceptions must let it pass.
struct fault_exit {
    cudaError_t e;
};

// Inside run: a device-side fault (illegal address, trap, misaligned access...): prints the
// diagnostic, makes `e` the sticky error of the context (every later API call returns it,
// as on a GPU) and returns e for run to return.
cudaError_t device_fault(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// A checker violation: prints "cudaemu: violation: ..." and exits with EXIT_VIOLATION.
[[noreturn]] void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// An API-level error: sets the calling thread's last error (cudaGetLastError) and returns
// e; with ZT_EMU_VERBOSE=1 the message is printed.
cudaError_t api_error(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Diagnostics: ZT_EMU_VERBOSE=1 prints emulator notes to stderr.
bool verbose();

}  // namespace zt_emu
#endif
