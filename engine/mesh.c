// The process-group mesh (engine/mesh.h): the rank arithmetic of the dimensions, one split of
// the world comm per dimension, and the names every group goes by in files and reports.
#include "engine/mesh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/job_shape.h"

// The dimensions, outermost first: a new one is a row here, an enumerator in mesh.h and its
// size and stride in dims_sizes. A group of a dimension is `size` ranks `stride` apart.
static const struct {
    zt_mesh_dim dim;
    const char *id;    // RUN/groups/<id>-<index>
    const char *name;  // "<name> group <index> (ranks ...)"
    int at_one;        // a comm also at size 1: the engine's unit collectives run on it even then (as copies)
} DIMS[] = {
    {ZT_MESH_REPLICATE, "replica", "replica", 0},
    {ZT_MESH_SHARD, "shard", "shard", 1},
    {ZT_MESH_CONTEXT, "context", "context", 0},
};
#define NDIMS ((int)(sizeof DIMS / sizeof DIMS[0]))

struct zt_mesh {
    int rank, world;
    int size[ZT_MESH_NDIMS_], coord[ZT_MESH_NDIMS_], stride[ZT_MESH_NDIMS_], index[ZT_MESH_NDIMS_];
    zt_comm *host[ZT_MESH_NDIMS_], *dev[ZT_MESH_NDIMS_];
    int own_world, own_dev_world;
    char title[ZT_MESH_NDIMS_][128];
};

// Sizes and strides: replicate W / G ranks G apart, shard G consecutive, context C consecutive.
static int dims_sizes(const zt_mesh_dims *d, int world, int size[ZT_MESH_NDIMS_], int stride[ZT_MESH_NDIMS_]) {
    const int G = d && d->shard > 0 ? d->shard : world;
    const int C = d && d->context > 1 ? d->context : 1;
    if (G > world || world % G != 0)
        return zt_err("--shard-group %d does not divide the world of %d ranks: the shards are held by groups of G "
                      "consecutive ranks and replicated W/G times, so G must be a divisor of %d (or 0 / the world: "
                      "full shard)", G, world, world);
    if (zt_context_check(&(zt_context_job){.context = C, .shard_group = G, .world = world}) != 0) return -1;
    size[ZT_MESH_WORLD] = world;
    size[ZT_MESH_SHARD] = G;
    size[ZT_MESH_REPLICATE] = world / G;
    size[ZT_MESH_CONTEXT] = C;
    stride[ZT_MESH_WORLD] = stride[ZT_MESH_SHARD] = stride[ZT_MESH_CONTEXT] = 1;
    stride[ZT_MESH_REPLICATE] = G;
    return 0;
}

// "ranks 2-3", "ranks 0,2", "ranks 1,9,...,1017 (every 8th)"
static void rank_list(char *buf, size_t n, int first, int count, int stride) {
    const int last = first + (count - 1) * stride;
    if (count == 1)
        snprintf(buf, n, "rank %d", first);
    else if (stride == 1)
        snprintf(buf, n, "ranks %d-%d", first, last);
    else if (count <= 8) {
        size_t at = (size_t)snprintf(buf, n, "ranks %d", first);
        for (int k = 1; k < count && at < n; k++) at += (size_t)snprintf(buf + at, n - at, ",%d", first + k * stride);
    } else
        snprintf(buf, n, "ranks %d,%d,...,%d (every %dth)", first, first + stride, last, stride);
}

// Every group of dimension i of the table, split from `world` (this rank's one kept in *out).
static int split_dim(const zt_mesh *m, zt_comm *world, int i, zt_comm **out) {
    const zt_mesh_dim d = DIMS[i].dim;
    const int n = m->size[d], first = m->rank - m->coord[d] * m->stride[d];
    int *ranks = zt_xmalloc((size_t)n * sizeof *ranks);
    for (int k = 0; k < n; k++) ranks[k] = first + k * m->stride[d];
    char id[64];
    snprintf(id, sizeof id, "%s-%d", DIMS[i].id, m->index[d]);
    const zt_comm_group g = {id, m->title[d], ranks, n};
    const int rc = zt_comm_split_group(world, m->index[d], m->coord[d], &g, out);
    free(ranks);
    return rc;
}

static void free_groups(zt_comm *const *groups, zt_comm *const *keep, zt_comm *world, int *rc) {
    for (int i = NDIMS - 1; i >= 0; i--) {  // innermost first, the reverse of creation
        zt_comm *c = groups[DIMS[i].dim];
        if (c && c != world && (!keep || c != keep[DIMS[i].dim]) && zt_comm_finalize(c) != 0) *rc = -1;
    }
}

int zt_mesh_create(zt_comm *world, const zt_mesh_dims *dims, int own_world, zt_mesh **out) {
    *out = NULL;
    zt_comm_info info;
    zt_comm_get_info(world, &info);
    zt_mesh *m = zt_xcalloc(1, sizeof *m);
    m->rank = info.rank;
    m->world = info.world;
    if (dims_sizes(dims, info.world, m->size, m->stride) != 0) {
        free(m);
        return -1;
    }
    // A group is `size` ranks `stride` apart; its index counts the groups in the order of their
    // first ranks' (blocks of stride * size ranks, each holding `stride` interleaved groups).
    for (int i = 0; i < NDIMS; i++) {
        const zt_mesh_dim d = DIMS[i].dim;
        const int n = m->size[d], st = m->stride[d];
        m->coord[d] = m->rank / st % n;
        const int first = m->rank - m->coord[d] * st;
        m->index[d] = first / (st * n) * st + first % st;
        char rl[96];
        rank_list(rl, sizeof rl, first, n, st);
        snprintf(m->title[d], sizeof m->title[d], "%s group %d (%s)", DIMS[i].name, m->index[d], rl);
    }
    m->stride[ZT_MESH_WORLD] = 1;
    m->coord[ZT_MESH_WORLD] = m->rank;
    snprintf(m->title[ZT_MESH_WORLD], sizeof m->title[ZT_MESH_WORLD], "world (ranks 0-%d)", m->world - 1);
    m->host[ZT_MESH_WORLD] = world;
    for (int i = 0; i < NDIMS; i++) {
        const zt_mesh_dim d = DIMS[i].dim;
        if (m->size[d] == m->world)
            m->host[d] = world;
        else if ((m->size[d] > 1 || DIMS[i].at_one) && split_dim(m, world, i, &m->host[d]) != 0) {
            int rc = 0;
            free_groups(m->host, NULL, world, &rc);
            free(m);
            return -1;
        }
    }
    m->own_world = own_world;
    *out = m;
    return 0;
}

int zt_mesh_attach_device(zt_mesh *m, zt_comm *dworld, int own) {
    zt_comm_info info;
    zt_comm_get_info(dworld, &info);
    if (info.rank != m->rank || info.world != m->world)
        return zt_err("mesh: the device comm (rank %d of %d) is not the mesh's world (rank %d of %d)", info.rank,
                      info.world, m->rank, m->world);
    if (m->dev[ZT_MESH_WORLD]) return zt_err("mesh: a device comm is attached already");
    m->dev[ZT_MESH_WORLD] = dworld;
    for (int i = 0; i < NDIMS; i++) {
        const zt_mesh_dim d = DIMS[i].dim;
        if (dworld == m->host[ZT_MESH_WORLD] || m->size[d] == m->world)
            m->dev[d] = dworld == m->host[ZT_MESH_WORLD] ? m->host[d] : dworld;
        else if ((m->size[d] > 1 || DIMS[i].at_one) && split_dim(m, dworld, i, &m->dev[d]) != 0) {
            int rc = 0;
            free_groups(m->dev, m->host, dworld, &rc);
            memset(m->dev, 0, sizeof m->dev);
            return -1;
        }
    }
    m->own_dev_world = own;
    return 0;
}

zt_comm *zt_mesh_group(const zt_mesh *m, zt_mesh_dim dim) { return (unsigned)dim < ZT_MESH_NDIMS_ ? m->host[dim] : NULL; }
zt_comm *zt_mesh_device_group(const zt_mesh *m, zt_mesh_dim dim) {
    return (unsigned)dim < ZT_MESH_NDIMS_ ? m->dev[dim] : NULL;
}
int zt_mesh_size(const zt_mesh *m, zt_mesh_dim dim) { return (unsigned)dim < ZT_MESH_NDIMS_ ? m->size[dim] : 0; }
int zt_mesh_rank(const zt_mesh *m, zt_mesh_dim dim) { return (unsigned)dim < ZT_MESH_NDIMS_ ? m->coord[dim] : -1; }
int zt_mesh_index(const zt_mesh *m, zt_mesh_dim dim) { return (unsigned)dim < ZT_MESH_NDIMS_ ? m->index[dim] : -1; }
const char *zt_mesh_title(const zt_mesh *m, zt_mesh_dim dim) {
    return (unsigned)dim < ZT_MESH_NDIMS_ ? m->title[dim] : "";
}

int zt_mesh_free(zt_mesh *m) {
    if (!m) return 0;
    int rc = 0;
    zt_comm *hw = m->host[ZT_MESH_WORLD], *dw = m->dev[ZT_MESH_WORLD];
    if (dw && dw != hw) {
        free_groups(m->dev, NULL, dw, &rc);
        if (m->own_dev_world && zt_comm_finalize(dw) != 0) rc = -1;
    }
    free_groups(m->host, NULL, hw, &rc);
    if (m->own_world && zt_comm_finalize(hw) != 0) rc = -1;
    free(m);
    return rc;
}
