// libFuzzer harness: the flight recorder (engine/flight.c), as `watch`, `report` and a
// rank's deadline dump read RUN/ranks/rank-NNNNN.flight. Input: the file's bytes
// (layout in engine/flight.h; the seeds hold small rings, a file fits -max_len).
// Properties: reading ends (a header field never sizes a loop: the run's -timeout is
// the check), and either refuses with an error that starts with the file's path, or
// accepts a ring the file can hold: capacity records within its size, at most capacity
// records, seqs strictly ascending within (issued - capacity, issued], printable NUL-
// terminated labels, 0 <= rank < world; the rank check refuses exactly another rank's
// file; the JSON written for it parses with one element per record; the summary of a
// run directory holding it (as rank 0, world 1) ends and counts at most one collective.
#include <cjson/cJSON.h>

#include "engine/flight.h"
#include "fuzz_util.h"
#include "base/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("ranks/rank-00000.flight", data, size);
    zt_flight_hdr h;
    zt_flight_rec *recs = NULL;
    int n = -1;
    if (zt_flight_read(path, &h, &recs, &n) != 0) {
        FUZZ_ASSERT(!strncmp(zt_errmsg(), path, strlen(path)), "a refusal names the file: %s", zt_errmsg());
        FUZZ_ASSERT(!recs && n == 0, "a refused file returns no records");
        FILE *devnull = fopen("/dev/null", "w");
        FUZZ_ASSERT(zt_flight_summarize_dir(fuzz_dir(), 1, devnull, "") == 0, "summary of a refused recorder");
        fclose(devnull);
        return 0;
    }
    const uint64_t cap = (uint64_t)h.capacity;
    FUZZ_ASSERT(h.capacity >= 1 && ZT_FLIGHT_HDR_BYTES + cap * ZT_FLIGHT_REC_BYTES <= size,
                "capacity %d in a file of %zu bytes", h.capacity, size);
    FUZZ_ASSERT(h.world >= 1 && h.rank >= 0 && h.rank < h.world && h.status <= ZT_FL_ABORTED,
                "rank %d world %d status %u", h.rank, h.world, h.status);
    FUZZ_ASSERT(n >= 0 && (uint64_t)n <= cap && (uint64_t)n <= h.issued, "%d records, capacity %d, issued %llu", n,
                h.capacity, (unsigned long long)h.issued);
    for (int i = 0; i < n; i++) {
        const zt_flight_rec *r = &recs[i];
        FUZZ_ASSERT(r->seq <= h.issued && h.issued - r->seq < cap, "seq %llu, issued %llu, capacity %d",
                    (unsigned long long)r->seq, (unsigned long long)h.issued, h.capacity);
        FUZZ_ASSERT(i == 0 || recs[i - 1].seq < r->seq, "records out of order at %d", i);
        FUZZ_ASSERT(memchr(r->label, 0, sizeof r->label), "label not terminated");
        for (const char *c = r->label; *c; c++)
            FUZZ_ASSERT((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in a label", (unsigned char)*c);
    }
    const zt_flight_rec *cur = zt_flight_current(recs, n);
    FUZZ_ASSERT(!cur || (cur >= recs && cur < recs + n), "current record outside the ring");

    // The rank check: this file is rank h.rank's.
    zt_flight_hdr h2;
    zt_flight_rec *r2 = NULL;
    int n2;
    FUZZ_ASSERT(zt_flight_read_rank(path, h.rank, &h2, &r2, &n2) == 0, "own rank refused: %s", zt_errmsg());
    free(r2);
    r2 = NULL;
    const int other = h.rank == 0 ? 1 : 0;
    FUZZ_ASSERT(zt_flight_read_rank(path, other, &h2, &r2, &n2) != 0 && !r2 && strstr(zt_errmsg(), path),
                "rank %d's file accepted as rank %d's", h.rank, other);

    // The JSON a deadline dump writes: it parses, one element per record.
    char *json = NULL;
    size_t jlen = 0;
    FILE *m = open_memstream(&json, &jlen);
    FUZZ_ASSERT(zt_flight_json(m, &h, recs, n, "fuzz") == 0, "json: %s", zt_errmsg());
    fclose(m);
    cJSON *j = cJSON_Parse(json);
    const cJSON *coll = cJSON_GetObjectItemCaseSensitive(j, "collectives");
    FUZZ_ASSERT(cJSON_IsArray(coll) && cJSON_GetArraySize(coll) == n, "the JSON does not parse to %d records:\n%s", n,
                json);
    cJSON_Delete(j);
    free(json);
    free(recs);

    // The cross-rank summary of a run directory holding it.
    FILE *devnull = fopen("/dev/null", "w");
    const int groups = zt_flight_summarize_dir(fuzz_dir(), 1, devnull, "");
    fclose(devnull);
    FUZZ_ASSERT(groups == (h.rank == 0 && cur ? 1 : 0), "summary: %d groups (rank %d, %s)", groups, h.rank,
                cur ? "in a collective" : "idle");
    return 0;
}
