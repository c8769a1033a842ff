// MPI backend of the process group: host buffers, non-blocking collectives
// (MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier,
// MPI_Ialltoallv)
// so the FSDP overlap schedule runs unchanged on the CPU.
#include "engine/comm_mpi.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

typedef struct {
    MPI_Comm data, ctrl;  // duplicates of base: see zt_chan in comm.h for why two
    MPI_Comm base;        // what zt_comm_init_mpi was given (not owned); MPI_COMM_NULL for a sub-group
    int rank, world;
} mpi_self;

typedef struct {
    MPI_Request req;
    int *v;  // all-to-all: send counts | displacements | recv counts | displacements (live until done)
} mpi_handle;

static int mpi_fail(int rc, const char *call, MPI_Comm comm) {
    char msg[MPI_MAX_ERROR_STRING] = "", name[MPI_MAX_OBJECT_NAME] = "?";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    if (comm != MPI_COMM_NULL) MPI_Comm_get_name(comm, name, &len);
    return zt_err("%s on communicator %s failed: %s", call, name, msg);
}

static MPI_Datatype mpi_type(zt_dtype dt) {
    switch (dt) {
    case ZT_DT_F32: return MPI_FLOAT;
    case ZT_DT_F64: return MPI_DOUBLE;
    case ZT_DT_I64: return MPI_INT64_T;
    case ZT_DT_I32: return MPI_INT32_T;
    case ZT_DT_U8: return MPI_UINT8_T;
    case ZT_DT_BF16: return MPI_UINT16_T;  // moved bit for bit, never reduced
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(zt_red red) {
    switch (red) {
    case ZT_RED_MIN: return MPI_MIN;
    case ZT_RED_MAX: return MPI_MAX;
    default: return MPI_SUM;  // SUM, and AVG = SUM scaled afterwards
    }
}

static int mpi_start(void *self_, const zt_coll *d, void **handle) {
    mpi_self *s = self_;
    *handle = NULL;
    int reduces = d->op == ZT_OP_REDUCE_SCATTER || d->op == ZT_OP_ALLREDUCE;
    if (reduces && d->dt == ZT_DT_BF16)
        return zt_err("bf16 %s is not supported by the MPI backend (MPI has no bf16 arithmetic); reduce in f32",
                      zt_red_name(d->red));
    if (d->count > INT_MAX)
        return zt_err("%zu elements exceed MPI's int count limit (%d); split the buffer", d->count, INT_MAX);
    int n = (int)d->count, rc = MPI_SUCCESS;
    MPI_Datatype t = mpi_type(d->dt);
    if (d->op == ZT_OP_ALLTOALL) {
        size_t nr = 0;
        for (int r = 0; r < s->world; r++) nr += d->recv_counts[r];
        if (nr > INT_MAX)  // the sent total was checked above; every displacement is below its total
            return zt_err("%zu received elements exceed MPI's int count limit (%d); split the buffer", nr, INT_MAX);
    }
    mpi_handle *h = zt_xcalloc(1, sizeof *h);
    if (s->world == 1 && d->op == ZT_OP_ALLTOALL) {
        if (d->send_counts[0] != d->recv_counts[0]) {
            free(h);
            return zt_err("alltoall: a world of one sends %zu elements to itself but receives %zu", d->send_counts[0],
                          d->recv_counts[0]);
        }
        memmove(d->recv, d->send, d->send_counts[0] * zt_dtype_size(d->dt));
        h->req = MPI_REQUEST_NULL;
        *handle = h;
        return 0;
    }
    if (s->world == 1) {
        // A world of one: every collective is its own result (a copy where send and recv
        // differ). Done here, without the library's schedule and its progress rounds.
        const size_t bytes = d->count * zt_dtype_size(d->dt);
        if (d->op != ZT_OP_BARRIER && d->op != ZT_OP_BROADCAST && d->send != d->recv)
            memmove(d->recv, d->send, bytes);
        h->req = MPI_REQUEST_NULL;  // MPI_Test of a null request reports it complete at once
        *handle = h;
        return 0;
    }
    const char *call = "?";
    MPI_Comm comm = d->chan == ZT_CHAN_DATA ? s->data : s->ctrl;
    switch (d->op) {
    case ZT_OP_ALLGATHER: {
        size_t block = d->count * zt_dtype_size(d->dt);
        const void *send = d->send == (const char *)d->recv + (size_t)s->rank * block ? MPI_IN_PLACE : d->send;
        call = "MPI_Iallgather";
        rc = MPI_Iallgather(send, n, t, d->recv, n, t, comm, &h->req);
        break;
    }
    case ZT_OP_REDUCE_SCATTER:
        call = "MPI_Ireduce_scatter_block";
        rc = MPI_Ireduce_scatter_block(d->send, d->recv, n, t, mpi_op(d->red), comm, &h->req);
        break;
    case ZT_OP_ALLREDUCE:
        call = "MPI_Iallreduce";
        rc = MPI_Iallreduce(d->send == d->recv ? MPI_IN_PLACE : d->send, d->recv, n, t, mpi_op(d->red), comm, &h->req);
        break;
    case ZT_OP_BROADCAST:
        call = "MPI_Ibcast";
        rc = MPI_Ibcast(d->recv, n, t, d->root, comm, &h->req);
        break;
    case ZT_OP_BARRIER:
        call = "MPI_Ibarrier";
        rc = MPI_Ibarrier(comm, &h->req);
        break;
    case ZT_OP_ALLTOALL: {
        const int w = s->world;
        h->v = zt_xmalloc((size_t)(4 * w) * sizeof(int));
        int *sc = h->v, *sd = h->v + w, *rc_ = h->v + 2 * w, *rd = h->v + 3 * w;
        for (int r = 0, so = 0, ro = 0; r < w; r++) {
            sc[r] = (int)d->send_counts[r], sd[r] = so, so += sc[r];
            rc_[r] = (int)d->recv_counts[r], rd[r] = ro, ro += rc_[r];
        }
        call = "MPI_Ialltoallv";
        rc = MPI_Ialltoallv(d->send, sc, sd, t, d->recv, rc_, rd, t, comm, &h->req);
        break;
    }
    }
    if (rc != MPI_SUCCESS) {
        free(h->v);
        free(h);
        return mpi_fail(rc, call, comm);
    }
    *handle = h;
    return 0;
}

static void scale(void *buf, size_t n, zt_dtype dt, double k) {
    if (dt == ZT_DT_F32) {
        float *x = buf, kf = (float)k;
        for (size_t i = 0; i < n; i++) x[i] *= kf;
    } else if (dt == ZT_DT_F64) {
        double *x = buf;
        for (size_t i = 0; i < n; i++) x[i] *= k;
    }
}

static int mpi_test(void *self_, const zt_coll *d, void *handle, int *done) {
    mpi_self *s = self_;
    mpi_handle *h = handle;
    int flag = 0;
    int rc = MPI_Test(&h->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        free(h->v);
        free(h);
        return mpi_fail(rc, "MPI_Test", d->chan == ZT_CHAN_DATA ? s->data : s->ctrl);
    }
    if (!flag) {
        *done = 0;
        return 0;
    }
    if (d->red == ZT_RED_AVG && (d->op == ZT_OP_REDUCE_SCATTER || d->op == ZT_OP_ALLREDUCE))
        scale(d->recv, d->count, d->dt, 1.0 / (double)s->world);
    free(h->v);
    free(h);
    *done = 1;
    return 0;
}

// Also called from the comm watchdog thread (a host wait past its deadline) while the
// main thread may sit inside MPI (HDF5's barrier): formally beyond MPI_THREAD_FUNNELED,
// but MPI_Abort only has the launcher kill the job, which Open MPI does from any
// thread (tests/cli/comm_watchdog.sh covers exactly that case: "--watch-hang mpi").
static void mpi_abort(void *self_, int code) {
    (void)self_;
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);  // MPI_Abort should not return; make sure the exit is non-zero anyway
}

static void mpi_destroy(void *self_) {
    mpi_self *s = self_;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {  // after MPI_Finalize the communicators are gone already
        if (s->data != MPI_COMM_NULL) MPI_Comm_free(&s->data);
        if (s->ctrl != MPI_COMM_NULL) MPI_Comm_free(&s->ctrl);
    }
    free(s);
}

static int mpi_split(void *self_, int color, int key, const char *name, const zt_comm_opts *opts, zt_comm **out);
static const zt_comm_backend mpi_backend = {"mpi", mpi_start, mpi_test, mpi_abort, mpi_destroy, NULL, mpi_split};

#define MPI_CHECK(call, comm)           \
    do {                                \
        int rc_ = (call);               \
        if (rc_ != MPI_SUCCESS) {       \
            mpi_fail(rc_, #call, comm); \
            goto fail;                  \
        }                               \
    } while (0)

int zt_mpi_node_layout(MPI_Comm base, zt_comm_info *info) {
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_rank(base, &info->rank), base);
    MPI_CHECK(MPI_Comm_size(base, &info->world), base);
    MPI_CHECK(MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, info->rank, MPI_INFO_NULL, &node), base);
    MPI_CHECK(MPI_Comm_rank(node, &info->local_rank), node);
    MPI_CHECK(MPI_Comm_size(node, &info->local_world), node);
    // Node index = rank of the node's local rank 0 among all local rank 0s (ordered by
    // global rank), handed to the rest of the node.
    MPI_CHECK(MPI_Comm_split(base, info->local_rank == 0 ? 0 : MPI_UNDEFINED, info->rank, &leaders), base);
    int nodeinfo[2] = {0, 0};
    if (leaders != MPI_COMM_NULL) {
        MPI_CHECK(MPI_Comm_rank(leaders, &nodeinfo[0]), leaders);
        MPI_CHECK(MPI_Comm_size(leaders, &nodeinfo[1]), leaders);
    }
    MPI_CHECK(MPI_Bcast(nodeinfo, 2, MPI_INT, 0, node), node);
    info->node = nodeinfo[0];
    info->nnodes = nodeinfo[1];
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    MPI_Comm_free(&node);
    return 0;
fail:
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    return -1;
}

int zt_comm_init_mpi(zt_comm **out, MPI_Comm base, const zt_comm_opts *opts) {
    *out = NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) return zt_err("zt_comm_init_mpi: MPI is not initialised (call zt_mpi_init_once first)");
    mpi_self *s = zt_xcalloc(1, sizeof *s);
    s->data = s->ctrl = MPI_COMM_NULL;
    s->base = base;
    zt_comm_info info = {0};
    MPI_CHECK(MPI_Comm_rank(base, &s->rank), base);
    MPI_CHECK(MPI_Comm_size(base, &s->world), base);
    MPI_CHECK(MPI_Comm_dup(base, &s->data), base);
    MPI_CHECK(MPI_Comm_dup(base, &s->ctrl), base);
    // Names show up in MPI error messages and in debuggers / MPI tools.
    MPI_Comm_set_name(s->data, "zerotrain-data");
    MPI_Comm_set_name(s->ctrl, "zerotrain-ctrl");
    // Errors come back to us so they can be reported with the rank and label.
    MPI_Comm_set_errhandler(s->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(s->ctrl, MPI_ERRORS_RETURN);

    if (zt_mpi_node_layout(base, &info) != 0) {
        mpi_destroy(s);
        return zt_err_prefix("zt_comm_init_mpi");
    }
    return zt_comm_create(out, &mpi_backend, s, &info, opts);
fail:
    mpi_destroy(s);
    return zt_err_prefix("zt_comm_init_mpi");
}

// A sub-group: both channels split the same way (MPI_Comm_split on each, so the child's
// data and ctrl communicators are as separate as the parent's), the node layout over it.
static int mpi_split(void *self_, int color, int key, const char *name, const zt_comm_opts *opts, zt_comm **out) {
    const mpi_self *p = self_;
    mpi_self *s = zt_xcalloc(1, sizeof *s);
    s->data = s->ctrl = s->base = MPI_COMM_NULL;
    zt_comm_info info = {0};
    char cname[MPI_MAX_OBJECT_NAME];
    MPI_CHECK(MPI_Comm_split(p->data, color, key, &s->data), p->data);
    MPI_CHECK(MPI_Comm_split(p->ctrl, color, key, &s->ctrl), p->ctrl);
    MPI_CHECK(MPI_Comm_rank(s->data, &s->rank), s->data);
    MPI_CHECK(MPI_Comm_size(s->data, &s->world), s->data);
    snprintf(cname, sizeof cname, "zerotrain-%.40s-data", name);
    MPI_Comm_set_name(s->data, cname);
    snprintf(cname, sizeof cname, "zerotrain-%.40s-ctrl", name);
    MPI_Comm_set_name(s->ctrl, cname);
    MPI_Comm_set_errhandler(s->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(s->ctrl, MPI_ERRORS_RETURN);
    if (zt_mpi_node_layout(s->ctrl, &info) != 0) {
        mpi_destroy(s);
        return -1;
    }
    return zt_comm_create(out, &mpi_backend, s, &info, opts);
fail:
    mpi_destroy(s);
    return -1;
}

int zt_comm_init_world(zt_comm **out, const zt_comm_opts *opts) { return zt_comm_init_mpi(out, MPI_COMM_WORLD, opts); }

MPI_Comm zt_comm_mpi_base(const zt_comm *c) {
    if (!c || strcmp(zt_comm_backend_name(c), "mpi") != 0) return MPI_COMM_NULL;
    return ((const mpi_self *)zt_comm_backend_self(c))->base;
}

static int zt_mpi_we_initialised;

int zt_mpi_init_once(void) { return zt_mpi_init_threads(MPI_THREAD_FUNNELED); }

int zt_mpi_init_threads(int level) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return 0;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, level, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread", MPI_COMM_NULL);
    zt_mpi_we_initialised = 1;
    // FUNNELED: only the main thread calls MPI (side threads such as the liveness tick
    // never do); a library giving less cannot run OpenMP regions safely around MPI.
    // MULTIPLE (asked for by --async-save, whose checkpoint writer thread calls MPI-IO on its
    // own communicator): a library giving less is refused where that writer is created.
    if (provided < MPI_THREAD_FUNNELED)
        return zt_err(
            "MPI_Init_thread: the MPI library provides thread level %d, zerotrain needs "
            "MPI_THREAD_FUNNELED (%d)",
            provided, MPI_THREAD_FUNNELED);
    return 0;
}

int zt_mpi_finalize_once(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!zt_mpi_we_initialised || fin) return 0;
    int rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Finalize", MPI_COMM_NULL);
}
