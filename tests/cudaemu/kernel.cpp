// cudaemu kernel execution: a grid runs on its stream's thread, one block at a time; each
// block's threads are cooperative fibers (a small context switch: x86-64 assembly, ucontext
// elsewhere) scheduled until every one of them is blocked, so that __syncthreads is a real
// barrier and warp intrinsics meet their 32 lanes. Launch configurations are checked as
// the driver checks them. Divergent barriers, incomplete warp masks and reads of inactive
// lanes are violations; __trap and bad accesses are device faults (sticky errors).
#define _GNU_SOURCE 1
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <map>
#include <mutex>

#include "cudaemu_device.h"
#include "internal.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace zt_emu {

enum { F_READY = 0, F_BARRIER, F_WARP, F_DONE, F_FAULT };
struct fiber {
    void *sp;
    int state;
    uint3 tid;
    // what a blocked fiber waits in
    const char *file;
    int line;
    int wkind, arg, width;
    unsigned mask;
    uint64_t val, result;
    const char *cname;  // W_COLLECTIVE: the call's name and what runs once the warp is there
    warp_coll_fn cfn;
};
struct blockrun {
    fiber *f = nullptr;
    int n = 0;
    void *sched_sp = nullptr;
    const std::function<void()> *body = nullptr;
    const char *name = "?";
    dim3 grid, block;
    char *smem = nullptr;
    cudaError_t fault = cudaSuccess;
};
static thread_local blockrun *t_blk;
static thread_local fiber *t_fib;

// ---- context switch -------------------------------------------------------------------------------
#if defined(__x86_64__)
extern "C" void zt_emu_ctx_switch(void **save_sp, void *to_sp);
extern "C" void zt_emu_fiber_entry();
// Saves the callee-saved registers, MXCSR and the x87 control word on the current stack,
// stores the stack pointer in *save_sp and resumes the context saved at to_sp.
__asm__(".text\n"
        ".globl zt_emu_ctx_switch\n"
        ".type zt_emu_ctx_switch,@function\n"
        "zt_emu_ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size zt_emu_ctx_switch, .-zt_emu_ctx_switch\n"
        ".globl zt_emu_fiber_entry\n"
        ".type zt_emu_fiber_entry,@function\n"
        "zt_emu_fiber_entry:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size zt_emu_fiber_entry, .-zt_emu_fiber_entry\n");
static void fiber_main(fiber *f);
static void *fiber_init(char *top, fiber *f) {
    uint64_t *sp = (uint64_t *)(top - 64);
    uint32_t mxcsr;
    uint16_t fcw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fcw));
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fcw << 32);
    sp[1] = 0;                          // r15
    sp[2] = 0;                          // r14
    sp[3] = (uint64_t)(void *)fiber_main;  // r13: called by the entry
    sp[4] = (uint64_t)f;                // r12: its argument
    sp[5] = 0;                          // rbx
    sp[6] = 0;                          // rbp
    sp[7] = (uint64_t)(void *)zt_emu_fiber_entry;
    return sp;
}
static inline void ctx_switch(void **save, void *to) { zt_emu_ctx_switch(save, to); }
#else
#include <ucontext.h>
// Portable fallback: slower (a signal-mask system call per switch).
struct uctx {
    ucontext_t uc;
};
static void fiber_main(fiber *f);
static thread_local uctx t_sched_uc;
static void *fiber_init(char *top, fiber *f) {
    uctx *u = (uctx *)(top - sizeof(uctx) - 64);
    getcontext(&u->uc);
    u->uc.uc_stack.ss_sp = (char *)u - (128 << 10) + 4096;
    u->uc.uc_stack.ss_size = (128 << 10) - 4096 - sizeof(uctx) - 64;
    u->uc.uc_link = nullptr;
    makecontext(&u->uc, (void (*)())fiber_main, 1, f);
    return u;
}
static inline void ctx_switch(void **save, void *to) {
    uctx tmp;
    uctx *me = *save ? (uctx *)*save : &tmp;
    if (!*save) *save = me;
    swapcontext(&me->uc, &((uctx *)to)->uc);
}
#endif

// Per host thread: stacks for up to 1024 threads of a block (guard page below each).
static const size_t STACK = 128 << 10;
static thread_local char *t_stacks;
static char *stack_top(int i) {
    if (!t_stacks) {
        const size_t each = STACK + 4096;
        void *m = mmap(nullptr, each * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) violation("cannot map the stacks of a block's 1024 threads");
        t_stacks = (char *)m;
        for (int k = 0; k < 1024; k++) mprotect(t_stacks + (size_t)k * each, 4096, PROT_NONE);
    }
    return t_stacks + (size_t)(i + 1) * (STACK + 4096);
}

static void fiber_main(fiber *f) {
    t_in_fiber = true;
    (*t_blk->body)();
    t_in_fiber = false;
    f->state = F_DONE;
    ctx_switch(&f->sp, t_blk->sched_sp);
    __builtin_unreachable();
}

static void yield_to_scheduler(fiber *f) {
    t_in_fiber = false;
    ctx_switch(&f->sp, t_blk->sched_sp);
    t_in_fiber = true;
}

void kernel_where(char *buf, size_t n) {
    if (!t_blk) {
        buf[0] = 0;
        return;
    }
    const fiber *f = t_fib;
    if (f)
        snprintf(buf, n, "kernel %s<<<(%u,%u,%u), (%u,%u,%u)>>> block (%u,%u,%u) thread (%u,%u,%u)", t_blk->name,
                 t_blk->grid.x, t_blk->grid.y, t_blk->grid.z, t_blk->block.x, t_blk->block.y, t_blk->block.z,
                 blockIdx.x, blockIdx.y, blockIdx.z, f->tid.x, f->tid.y, f->tid.z);
    else
        snprintf(buf, n, "kernel %s block (%u,%u,%u)", t_blk->name, blockIdx.x, blockIdx.y, blockIdx.z);
}

void kernel_abort(cudaError_t e) {
    fiber *f = t_fib;
    if (!f || !t_blk) throw fault_exit{e};
    t_blk->fault = e;
    f->state = F_FAULT;
    t_in_fiber = false;
    ctx_switch(&f->sp, t_blk->sched_sp);  // never resumed
    __builtin_unreachable();
}

// ---- intrinsics (called from kernel threads) -----------------------------------------------------
static fiber *me(const char *what, const char *file, int line) {
    if (!t_fib || !t_blk) violation("%s called outside a kernel (%s:%d)", what, file, line);
    return t_fib;
}

void k_syncthreads(const char *file, int line) {
    fiber *f = me("__syncthreads", file, line);
    f->state = F_BARRIER;
    f->file = file;
    f->line = line;
    yield_to_scheduler(f);
}

static const char *wname(int k) {
    switch (k) {
    case W_SHFL: return "__shfl_sync";
    case W_SHFL_UP: return "__shfl_up_sync";
    case W_SHFL_DOWN: return "__shfl_down_sync";
    case W_SHFL_XOR: return "__shfl_xor_sync";
    case W_BALLOT: return "__ballot_sync";
    case W_ANY: return "__any_sync";
    case W_ALL: return "__all_sync";
    default: return "__syncwarp";
    }
}

static const char *fname(const fiber &f) { return f.wkind == W_COLLECTIVE ? f.cname : wname(f.wkind); }

void k_warp_collective(const char *what, warp_coll_fn fn, void *payload, const char *file, int line) {
    fiber *f = me(what, file, line);
    f->state = F_WARP;
    f->wkind = W_COLLECTIVE;
    f->mask = 0xffffffffu;
    f->val = (uint64_t)(uintptr_t)payload;
    f->arg = 0;
    f->width = 32;
    f->cname = what;
    f->cfn = fn;
    f->file = file;
    f->line = line;
    yield_to_scheduler(f);
}

uint64_t k_warp(int kind, unsigned mask, uint64_t value, int arg, int width, const char *file, int line) {
    fiber *f = me(wname(kind), file, line);
    f->state = F_WARP;
    f->wkind = kind;
    f->mask = mask;
    f->val = value;
    f->arg = arg;
    f->width = width;
    f->file = file;
    f->line = line;
    yield_to_scheduler(f);
    return f->result;
}

unsigned k_activemask() {
    fiber *f = me("__activemask", "?", 0);
    const int lin = (int)(f - t_blk->f), w0 = lin & ~31;
    unsigned m = 0;
    for (int l = 0; l < 32 && w0 + l < t_blk->n; l++)
        if (t_blk->f[w0 + l].state != F_DONE) m |= 1u << l;
    return m;
}

void k_trap(const char *file, int line) {
    char where[256];
    kernel_where(where, sizeof where);
    device_fault(cudaErrorLaunchFailure, "__trap() at %s:%d in %s", file, line, where);
    kernel_abort(cudaErrorLaunchFailure);
}

void *k_dynamic_smem() {
    me("dynamic shared memory", "?", 0);
    return t_blk->smem;
}

long long k_clock64() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// ---- the block scheduler --------------------------------------------------------------------------
static void lanes_str(char *buf, size_t n, unsigned m) {
    snprintf(buf, n, "0x%08x", m);
}

[[noreturn]] static void sync_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sync_violation(const char *fmt, ...) {
    char msg[1500], where[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(where, sizeof where, "kernel %s<<<(%u,%u,%u), (%u,%u,%u)>>> block (%u,%u,%u)", t_blk->name,
             t_blk->grid.x, t_blk->grid.y, t_blk->grid.z, t_blk->block.x, t_blk->block.y, t_blk->block.z, blockIdx.x,
             blockIdx.y, blockIdx.z);
    char op[900] = "";
    if (t_op) describe_op(t_op, op, sizeof op);
    violation("%s: %s (launched as %s)", where, msg, op);
}

static const char *short_file(const char *f) {
    const char *q = strstr(f, "kernels/");
    if (!q) q = strstr(f, "tests/");
    return q ? q : f;
}

// Lane l's group (same warp op, same mask, same call site) is complete: compute every
// member's result. Returns false while a lane named in the mask has not arrived.
static bool try_warp(blockrun *b, int lin) {
    fiber *F = b->f;
    fiber &x = F[lin];
    const int w0 = lin & ~31, lane = lin & 31;
    const unsigned m = x.mask;
    if (!(m & (1u << lane)))
        sync_violation("%s at %s:%d: thread %d (lane %d) calls it with mask 0x%08x, which does not include its own lane",
                       fname(x), short_file(x.file), x.line, lin, lane, m);
    unsigned arrived = 0, exited = 0;
    for (int l = 0; l < 32; l++) {
        if (!(m & (1u << l))) continue;
        const int j = w0 + l;
        if (j >= b->n)
            sync_violation("%s at %s:%d with mask 0x%08x names lane %d, which does not exist (the block has %d threads)",
                           fname(x), short_file(x.file), x.line, m, l, b->n);
        const fiber &y = F[j];
        if (y.state == F_DONE) {
            exited |= 1u << l;
        } else if (y.state == F_WARP && y.wkind == x.wkind && y.mask == m && y.file == x.file && y.line == x.line) {
            arrived |= 1u << l;
        } else {
            return false;  // not there yet (or stuck elsewhere: the deadlock check names it)
        }
    }
    if (x.wkind == W_COLLECTIVE) {  // a WMMA call: the whole warp, every lane alive
        if (exited)
            sync_violation("%s at %s:%d: lane %d of the warp has exited; a warp collective must be called by all 32 "
                           "lanes (a call from a divergent subset is undefined on a GPU)",
                           fname(x), short_file(x.file), x.line, __builtin_ctz(exited));
        void *lanes[32];
        for (int l = 0; l < 32; l++) lanes[l] = (void *)(uintptr_t)F[w0 + l].val;
        const char *err = x.cfn(lanes);
        if (err) sync_violation("%s at %s:%d: %s", fname(x), short_file(x.file), x.line, err);
        for (int l = 0; l < 32; l++) F[w0 + l].state = F_READY;
        return true;
    }
    const int width = x.width;
    if (width < 1 || width > 32 || (width & (width - 1)))
        sync_violation("%s at %s:%d: width %d is not a power of two in [1, 32]", wname(x.wkind), short_file(x.file),
                       x.line, width);
    uint64_t ballot = 0;
    for (int l = 0; l < 32; l++)
        if ((arrived >> l & 1) && F[w0 + l].val) ballot |= 1ull << l;
    for (int l = 0; l < 32; l++) {
        if (!(arrived >> l & 1)) continue;
        fiber &y = F[w0 + l];
        const int seg = l & ~(width - 1);
        int src = l;
        switch (x.wkind) {
        case W_SHFL: src = seg + (y.arg & (width - 1)); break;
        case W_SHFL_UP: src = l - y.arg >= seg ? l - y.arg : l; break;
        case W_SHFL_DOWN: src = l + y.arg < seg + width ? l + y.arg : l; break;
        case W_SHFL_XOR: src = (l ^ y.arg) < seg + width ? (l ^ y.arg) : l; break;
        default: break;
        }
        switch (x.wkind) {
        case W_SHFL:
        case W_SHFL_UP:
        case W_SHFL_DOWN:
        case W_SHFL_XOR:
            if (src < 0 || src > 31 || !(arrived >> src & 1))
                sync_violation("%s at %s:%d (mask 0x%08x): lane %d reads lane %d, which %s; the value is undefined on "
                               "a GPU",
                               wname(x.wkind), short_file(x.file), x.line, m, l, src,
                               src >= 0 && src < 32 && (exited >> src & 1) ? "has exited"
                                                                          : "does not take part (not in the mask)");
            y.result = F[w0 + src].val;
            break;
        case W_BALLOT: y.result = ballot; break;
        case W_ANY: y.result = ballot != 0; break;
        case W_ALL: y.result = ballot == (uint64_t)arrived; break;
        default: y.result = 0; break;
        }
    }
    for (int l = 0; l < 32; l++)
        if (arrived >> l & 1) F[w0 + l].state = F_READY;
    return true;
}

// Nothing can run: either every live thread waits at one __syncthreads (release them) or
// the block is stuck / divergent (a violation naming who waits where).
static void no_progress(blockrun *b) {
    fiber *F = b->f;
    int live = 0, at_bar = 0, done = 0, first_bar = -1;
    for (int i = 0; i < b->n; i++) {
        if (F[i].state == F_DONE) {
            done++;
            continue;
        }
        live++;
        if (F[i].state == F_BARRIER) {
            at_bar++;
            if (first_bar < 0) first_bar = i;
        }
    }
    if (live && at_bar == live) {
        const fiber &r = F[first_bar];
        for (int i = 0; i < b->n; i++)
            if (F[i].state == F_BARRIER && (F[i].file != r.file || F[i].line != r.line))
                sync_violation("__syncthreads reached at different places: thread %d at %s:%d, thread %d at %s:%d "
                               "(a barrier in divergent code: undefined on a GPU, it may hang or pass early)",
                               first_bar, short_file(r.file), r.line, i, short_file(F[i].file), F[i].line);
        if (done)
            sync_violation("__syncthreads at %s:%d: %d thread(s) wait there while %d thread(s) of the block have already "
                           "exited (a barrier in divergent code: undefined on a GPU)",
                           short_file(r.file), r.line, at_bar, done);
        for (int i = 0; i < b->n; i++) F[i].state = F_READY;
        return;
    }
    // A group may have become complete by lanes exiting since its last member arrived.
    bool resolved = false;
    for (int i = 0; i < b->n; i++)
        if (F[i].state == F_WARP && try_warp(b, i)) resolved = true;
    if (resolved) return;
    // stuck: describe the first blocked warp op and what its missing lanes do
    for (int i = 0; i < b->n; i++) {
        if (F[i].state != F_WARP) continue;
        const fiber &x = F[i];
        const int w0 = i & ~31;
        char ms[16];
        lanes_str(ms, sizeof ms, x.mask);
        for (int l = 0; l < 32; l++) {
            if (!(x.mask >> l & 1) || w0 + l >= b->n) continue;
            const fiber &y = F[w0 + l];
            if (y.state == F_WARP && y.wkind == x.wkind && y.mask == x.mask && y.file == x.file && y.line == x.line)
                continue;
            if (y.state == F_DONE) continue;
            sync_violation("thread %d waits in %s at %s:%d (mask %s) for lane %d, which waits in %s at %s:%d: the "
                           "warp's lanes diverged (deadlock or undefined behaviour on a GPU)",
                           i, fname(x), short_file(x.file), x.line, ms, l,
                           y.state == F_BARRIER ? "__syncthreads" : fname(y), short_file(y.file), y.line);
        }
    }
    sync_violation("the block cannot make progress (%d live threads, %d at a barrier)", live, at_bar);
}

// ZT_EMU_WARP_AHEAD=1: once a warp's collective completes, its lanes run on before any later
// warp, so a warp reaches its next __syncthreads (or exits) while the others still wait at their
// previous step: a missing block barrier lets it overwrite shared memory they have not read yet.
// (The default, one pass over all threads per step, keeps the warps within a step of each other.)
static bool warp_ahead() {
    static const bool on = [] {
        const char *e = getenv("ZT_EMU_WARP_AHEAD");
        return e && *e && strcmp(e, "0") != 0;
    }();
    return on;
}

static cudaError_t run_block(blockrun *b) {
    fiber *F = b->f;
    const unsigned bx = b->block.x, by = b->block.y;
    for (int i = 0; i < b->n; i++) {
        F[i].state = F_READY;
        F[i].tid = uint3{(unsigned)i % bx, ((unsigned)i / bx) % by, (unsigned)i / (bx * by)};
        F[i].sp = fiber_init(stack_top(i), &F[i]);
    }
    int live = b->n;
    while (live > 0) {
        bool ran = false;
        for (int i = 0; i < b->n; i++) {
            fiber &f = F[i];
            if (f.state != F_READY) continue;
            ran = true;
            t_fib = &f;
            threadIdx = f.tid;
            ctx_switch(&b->sched_sp, f.sp);
            t_fib = nullptr;
            if (f.state == F_FAULT) return b->fault;
            if (f.state == F_DONE) live--;
            else if (f.state == F_WARP && try_warp(b, i) && warp_ahead()) i = (i & ~31) - 1;  // the warp again
        }
        if (!ran && live > 0) no_progress(b);
    }
    return cudaSuccess;
}

struct grid_job {
    const char *name;
    dim3 grid, block;
    size_t smem;
    std::function<void()> body;
};

static cudaError_t run_grid(const grid_job &j) {
    blockrun b;
    b.name = j.name;
    b.grid = j.grid;
    b.block = j.block;
    b.body = &j.body;
    b.n = (int)(j.block.x * j.block.y * j.block.z);
    std::vector<fiber> fibers((size_t)b.n);
    b.f = fibers.data();
    std::vector<char> smem(j.smem ? j.smem : 16);
    b.smem = smem.data();
    blockrun *saved = t_blk;
    t_blk = &b;
    gridDim = j.grid;
    blockDim = j.block;
    cudaError_t e = cudaSuccess;
    for (unsigned z = 0; z < j.grid.z && !e; z++)
        for (unsigned y = 0; y < j.grid.y && !e; y++)
            for (unsigned x = 0; x < j.grid.x && !e; x++) {
                blockIdx = uint3{x, y, z};
                if (j.smem) memset(b.smem, 0xff, j.smem);  // shared memory has no defined contents
                e = run_block(&b);
            }
    t_blk = saved;
    return e;
}

// ---- launch -------------------------------------------------------------------------------------
static std::mutex &attr_mu() {
    static auto *m = new std::mutex;
    return *m;
}
static std::map<const void *, int> &max_dyn_smem() {
    static auto *m = new std::map<const void *, int>;
    return *m;
}
static const int DEFAULT_DYN_SMEM = 48 << 10, OPTIN_SMEM = 232448;

void launch_kernel(const char *name, const char *file, int line, const void *fn, dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, std::function<void()> body, const void *const *ptr_args, const int *ptr_index,
                   int nptr) {
    if (sticky()) {
        api_error(sticky(), nullptr);
        return;
    }
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z || block.x > 1024 || block.y > 1024 ||
        block.z > 64 || threads > 1024 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        api_error(cudaErrorInvalidConfiguration,
                  "launch of %s at %s:%d: grid (%u,%u,%u) block (%u,%u,%u): at most 1024 threads per block "
                  "(x, y <= 1024, z <= 64), grid y and z <= 65535, no zero dimension",
                  name, file, line, grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return;
    }
    int limit = DEFAULT_DYN_SMEM;
    {
        std::lock_guard<std::mutex> g(attr_mu());
        auto it = max_dyn_smem().find(fn);
        if (it != max_dyn_smem().end()) limit = it->second;
    }
    if (smem > (size_t)limit) {
        api_error(cudaErrorInvalidValue,
                  "launch of %s at %s:%d: %zu bytes of dynamic shared memory exceed the function's limit of %d (above "
                  "48 KiB needs cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))",
                  name, file, line, smem, limit);
        return;
    }
    const int dev = stream_device(stream);
    if (dev < 0) {
        api_error(cudaErrorInvalidResourceHandle, "launch of %s at %s:%d: invalid stream", name, file, line);
        return;
    }
    // A pointer argument must be device memory of the stream's device or page-locked host
    // memory; anything else faults on a GPU as soon as the kernel dereferences it.
    for (int i = 0; i < nptr; i++) {
        const void *p = ptr_args[i];
        if (!p) continue;
        const mem_info mi = mem_lookup(p);
        alloc *a = mi.kind == MEM_NONE ? find_alloc((uintptr_t)p, false) : nullptr;  // one past the end
        const int kind = mi.kind != MEM_NONE ? mi.kind : (a ? a->kind : MEM_NONE);
        const int adev = mi.kind != MEM_NONE ? mi.device : (a ? a->device : -1);
        if (kind == MEM_NONE)
            violation("kernel %s launched at %s:%d: argument %d is %p, which is not device memory (a host pointer or "
                      "freed memory): the kernel would fault on a GPU when it dereferences it",
                      name, file, line, ptr_index[i] + 1, p);
        if (kind == MEM_DEVICE && adev != dev)
            violation("kernel %s launched at %s:%d on device %d: argument %d points to memory of device %d", name, file,
                      line, dev, ptr_index[i] + 1, adev);
    }
    op *o = new op;
    o->what = name;
    o->file = file;
    o->line = line;
    o->in_kernel = true;
    auto job = std::make_shared<grid_job>(grid_job{name, grid, block, smem, std::move(body)});
    o->run = [job]() { return run_grid(*job); };
    cudaError_t e = enqueue_at(stream, o);
    if (e) api_error(e, "launch of %s: %s", name, cudaGetErrorString(e));
}

// ---- atomics ----------------------------------------------------------------------------------------
static inline void atomic_access(void *p, size_t n) {
    if (t_op && (uintptr_t)p - g_hook_lo < g_hook_span) {
        access_slow((uintptr_t)p, n, false, true, __builtin_return_address(0));
        access_slow((uintptr_t)p, n, true, true, __builtin_return_address(0));
    }
}
template <class T, class F>
static T cas_loop(T *p, F f) {
    atomic_access(p, sizeof(T));
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "");
    typedef typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type U;
    U *q = (U *)p;
    U old = __atomic_load_n(q, __ATOMIC_RELAXED), nw;
    T o;
    do {
        memcpy(&o, &old, sizeof o);
        T n = f(o);
        memcpy(&nw, &n, sizeof nw);
    } while (!__atomic_compare_exchange_n(q, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return o;
}
int atomic_add_i32(int *p, int v) { return cas_loop(p, [v](int o) { return (int)((unsigned)o + (unsigned)v); }); }
unsigned atomic_add_u32(unsigned *p, unsigned v) { return cas_loop(p, [v](unsigned o) { return o + v; }); }
unsigned long long atomic_add_u64(unsigned long long *p, unsigned long long v) {
    return cas_loop(p, [v](unsigned long long o) { return o + v; });
}
float atomic_add_f32(float *p, float v) { return cas_loop(p, [v](float o) { return o + v; }); }
double atomic_add_f64(double *p, double v) { return cas_loop(p, [v](double o) { return o + v; }); }
int atomic_max_i32(int *p, int v) { return cas_loop(p, [v](int o) { return o > v ? o : v; }); }
int atomic_min_i32(int *p, int v) { return cas_loop(p, [v](int o) { return o < v ? o : v; }); }
unsigned atomic_max_u32(unsigned *p, unsigned v) { return cas_loop(p, [v](unsigned o) { return o > v ? o : v; }); }
unsigned atomic_min_u32(unsigned *p, unsigned v) { return cas_loop(p, [v](unsigned o) { return o < v ? o : v; }); }
int atomic_exch_i32(int *p, int v) { return cas_loop(p, [v](int) { return v; }); }
unsigned atomic_exch_u32(unsigned *p, unsigned v) { return cas_loop(p, [v](unsigned) { return v; }); }
int atomic_cas_i32(int *p, int c, int v) { return cas_loop(p, [c, v](int o) { return o == c ? v : o; }); }
unsigned atomic_cas_u32(unsigned *p, unsigned c, unsigned v) {
    return cas_loop(p, [c, v](unsigned o) { return o == c ? v : o; });
}
unsigned long long atomic_cas_u64(unsigned long long *p, unsigned long long c, unsigned long long v) {
    return cas_loop(p, [c, v](unsigned long long o) { return o == c ? v : o; });
}
void thread_fence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

}  // namespace zt_emu

using namespace zt_emu;

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    if (!func) return api_error(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute(NULL)");
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > OPTIN_SMEM)
            return api_error(cudaErrorInvalidValue,
                             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): the device allows at most %d", value,
                             OPTIN_SMEM);
        std::lock_guard<std::mutex> g(attr_mu());
        max_dyn_smem()[func] = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return api_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d not emulated", (int)attr);
}
