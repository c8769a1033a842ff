// libFuzzer harness: a run directory's watcher files as `zerotrain report` and `zerotrain
// watch` read them (ops/report.c, ops/watch.c): watch.json, heartbeat.json, run.json and
// rank 0's flight recorder. Input: watch.json's bytes, a NUL, heartbeat.json's, a NUL,
// run.json's, a NUL, then ranks/rank-00000.flight's (a part the input does not reach is
// absent).
// Properties: everything ends (no field sizes a loop or an allocation: the run's -timeout
// and -rss_limit_mb are the checks); the world size taken from run.json is a whole number
// the files allow (1: only rank 0 has files here, whatever its recorder's header says),
// it differs from the claim exactly when a refusal names run.json; the report is written, or refused naming the directory; a
// written page has a known state word, no <script> (watch.json's text is escaped), and a
// summary line without control bytes; the watcher's verdict on the same files is written
// to watch.json, which parses back with its state.
#include <cjson/cJSON.h>
#include <math.h>

#include "fuzz_util.h"
#include "ops/report.h"
#include "ops/watch.h"
#include "base/common.h"

static const char *names[] = {"watch.json", "heartbeat.json", "run.json", "ranks/rank-00000.flight"};
static const char *states[] = {"complete", "running", "starting", "hung", "crashed", "failed", "stopped", "unknown"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_dir();
    const uint8_t *p = data, *end = data + size;
    char *run_text = NULL;
    int reached = 1;
    for (int i = 0; i < 4; i++) {
        if (!reached) {
            fuzz_unlink(names[i]);
            continue;
        }
        const uint8_t *nul = i < 3 ? memchr(p, 0, (size_t)(end - p)) : NULL;
        const size_t n = nul ? (size_t)(nul - p) : (size_t)(end - p);
        fuzz_write(names[i], p, n);
        if (i == 2) run_text = fuzz_cstr(p, n);
        if (nul)
            p = nul + 1;
        else
            reached = 0;
    }

    // The world size run.json claims, as the report's diagnosis takes it.
    cJSON *run = run_text ? cJSON_Parse(run_text) : NULL;
    free(run_text);
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(run, "world_size");
    const double claimed = cJSON_IsNumber(ws) ? ws->valuedouble : NAN;
    cJSON_Delete(run);
    char src[700], why[8192];
    snprintf(src, sizeof src, "%s/run.json", dir);
    const int world = zt_watch_world(dir, src, claimed, why, sizeof why);
    const int bound = 1;  // the directory holds no rank's files but rank 0's
    if (isnan(claimed)) {
        FUZZ_ASSERT(world >= 0 && world <= 1 && !why[0], "no claim: world %d (%s)", world, why);
    } else {
        FUZZ_ASSERT(world >= 1 && world <= bound, "claimed %.17g: world %d, the files allow %d", claimed, world, bound);
        FUZZ_ASSERT((world == claimed) == !why[0], "claimed %.17g, world %d, why \"%s\"", claimed, world, why);
        FUZZ_ASSERT(!why[0] || !strncmp(why, src, strlen(src)), "a refusal names run.json: %s", why);
    }

    // The report.
    char out[700], summary[4096] = "";
    snprintf(out, sizeof out, "%s/report.html", dir);
    zt_report_opts o = {.bands_name = "built in", .window = 1.0};
    zt_bands_b300(&o.bands);
    if (zt_report_write(dir, out, &o, summary, sizeof summary) != 0) {
        FUZZ_ASSERT(strstr(zt_errmsg(), dir), "a refused report names the directory: %s", zt_errmsg());
    } else {
        char *html = zt_read_file(out, NULL);
        FUZZ_ASSERT(html, "report.html: %s", zt_errmsg());
        FUZZ_ASSERT(!strstr(html, "<script"), "a <script> on the page");
        const char *ds = strstr(html, "data-state=\"");
        FUZZ_ASSERT(ds, "no data-state on the page");
        ds += strlen("data-state=\"");
        int known = 0;
        for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
            known |= !strncmp(ds, states[i], strlen(states[i])) && ds[strlen(states[i])] == '"';
        FUZZ_ASSERT(known, "unknown state word: %.20s", ds);
        free(html);
        for (const char *c = summary; *c; c++)
            FUZZ_ASSERT((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in the summary",
                        (unsigned char)*c);
    }

    // The watcher on the same files: one poll, the diagnosis, watch.json written and read back.
    zt_watch w;
    zt_watch_opts wo;
    zt_watch_opts_default(&wo);
    zt_watch_init(&w, dir, &wo);
    const double now = 2e9;
    const zt_watch_state st = zt_watch_poll(&w, now);
    FUZZ_ASSERT(w.world >= 0 && w.world <= bound, "the watcher judges %d ranks, the files allow %d", w.world, bound);
    zt_watch_diagnose(&w, now);
    FUZZ_ASSERT(zt_watch_write_json(&w, now) == 0, "watch.json: %s", zt_errmsg());
    char wpath[700];
    snprintf(wpath, sizeof wpath, "%s/watch.json", dir);
    char *text = zt_read_file(wpath, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "state");
    FUZZ_ASSERT(cJSON_IsString(s) && !strcmp(s->valuestring, zt_watch_state_name(st)), "watch.json state:\n%s",
                text ? text : "(unreadable)");
    cJSON_Delete(j);
    free(text);
    zt_watch_free(&w);
    return 0;
}
