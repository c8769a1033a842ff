// cudaemu internals of the runtime core (runtime.cpp, kernel.cpp, hooks.cpp): allocations,
// streams, ops with their vector clocks and footprints, the per-thread op context that the
// access hooks attribute device-memory accesses to. Not used by cublaslt.cpp / nccl.cpp
// (they see emu.h only).
#ifndef ZT_CUDAEMU_INTERNAL_H
#define ZT_CUDAEMU_INTERNAL_H
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "emu.h"

namespace zt_emu {

enum { MAX_SLOTS = 256 };  // streams per process (each gets a vector-clock slot; never reused)

typedef std::vector<uint64_t> vclock;  // [slot] = last op seq of that stream known to happen before
void vc_join(vclock &a, const vclock &b);
static inline uint64_t vc_at(const vclock &v, int slot) { return (size_t)slot < v.size() ? v[slot] : 0; }

// ---- allocations ----------------------------------------------------------------------------------
struct access_rec {       // a finished op's footprint on one allocation (for the race check)
    int slot;
    uint64_t seq;
    uintptr_t rlo, rhi, wlo, whi;  // [lo, hi) read and written byte ranges (bounding), empty: lo >= hi
    const char *what, *file;
    int line;
    const void *caller;
    bool pseudo;          // cudaMallocAsync / cudaFreeAsync: the allocation's life, not data
};
struct alloc {
    uint64_t id;
    char *base;           // what the program sees
    size_t size;          // bytes requested
    char *map_lo;         // committed mapping (page aligned) that contains [base, base + size)
    size_t map_len;
    int kind;             // mem_kind
    int device;
    const char *how;      // "cudaMalloc", "cudaMallocAsync", "cudaMallocHost", "cudaHostRegister"
    const void *caller;   // return address of the allocating call
    std::atomic<bool> freed{false};
    uint64_t *init = nullptr;  // device memory: 1 bit per 2 bytes written at least once
    // Finished ops' footprints on this allocation, per stream slot in completion (= seq)
    // order, under chk_mu(); pruned from the front once no future op can be unordered with them.
    std::vector<std::pair<int, std::deque<access_rec>>> recs;
    size_t pin_off = 0;   // page-locked: offset of the mapping in the memfd
};
alloc *find_alloc(uintptr_t p, bool include_freed);  // live allocation containing p (or p == end)

// ---- ops and streams ------------------------------------------------------------------------------
struct fp_entry {
    alloc *a;
    uintptr_t rlo, rhi, wlo, whi;
    bool pseudo;
};
struct op {
    uint64_t seq = 0;
    int slot = -1;
    int device = 0;
    vclock vc;
    const char *what = "?", *file = "?";
    int line = 0;
    const void *caller = nullptr;
    std::function<cudaError_t()> run;
    std::vector<std::pair<int, uint64_t>> waits;  // (slot, seq) to complete first
    std::vector<fp_entry> fp;
    int fp_last = -1;
    std::shared_ptr<double> stamp;                // event records: completion time
    bool in_kernel = false;
};
struct stream {
    int slot = -1, device = 0;
    unsigned flags = 0;
    bool legacy = false;
    char name[64];
    const void *caller = nullptr;
    std::mutex mu;
    std::condition_variable cv_work, cv_done;
    std::deque<op *> q;                // pending, the front one executing
    uint64_t enq_seq = 0;              // under api_mu()
    std::atomic<uint64_t> done_seq{0};
    vclock vc;                         // under api_mu()
    bool dying = false;
    uint64_t rng = 0;
};
extern stream *g_slot[MAX_SLOTS];

// ---- per host thread -------------------------------------------------------------------------------
extern thread_local op *t_op;          // the op the current thread executes (stream threads)
extern thread_local bool t_in_fiber;   // inside a kernel thread (fiber)

// ---- reporting -----------------------------------------------------------------------------------
void describe_pc(const void *pc, char *buf, size_t n);  // "func (file:line)" via addr2line
void describe_op(const op *o, char *buf, size_t n);
void describe_alloc(const alloc *a, char *buf, size_t n);
void set_sticky(cudaError_t e);
cudaError_t sticky();

// kernel.cpp: a fault inside a kernel thread ends the grid (the fiber never resumes).
[[noreturn]] void kernel_abort(cudaError_t e);
void kernel_where(char *buf, size_t n);  // "kernel K block (x,y,z) thread (x,y,z)" or ""

// The slow path of every instrumented access (hooks.cpp calls it for addresses inside the
// emulator's heap): bounds, alignment, initialisation, footprint.
void access_slow(uintptr_t addr, size_t n, bool write, bool check_align, const void *pc);
// Enqueue a prepared op (what/file/line/caller/run set) on s: the runtime's own entry.
cudaError_t enqueue_at(cudaStream_t s, op *o);
extern uintptr_t g_hook_lo, g_hook_span;
}  // namespace zt_emu
#endif
