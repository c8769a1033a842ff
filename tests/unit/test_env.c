// base/env.h: the table of the ZT_* variables the product reads (every name "ZT_..." once, a
// kind, a doc line, and named in docs/design.md's "Test and fault hooks"), the accessors'
// parsing (a switch, an integer, a number, unset vs empty), and when a value is taken: a ONCE
// variable keeps its first value, an EACH_USE one follows the environment (the unit tests of
// the checkpoint save and the comm watchdog change theirs between two operations).
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/env.h"
#include "tests/support/test_util.h"

static void test_table(void) {
    char *design = zt_read_file(ZT_TEST_DIR "/../docs/design.md", NULL);
    CHECK(design != NULL, "read docs/design.md: %s", zt_errmsg());
    const char *section = design ? strstr(design, "## Test and fault hooks") : NULL;
    CHECK(section != NULL, "docs/design.md has a section \"Test and fault hooks\"");
    for (int v = 0; v < ZT_ENV_COUNT; v++) {
        const zt_env_entry *e = zt_env_info((zt_env_var)v);
        CHECK(e->name && !strncmp(e->name, "ZT_", 3), "entry %d has a ZT_ name (%s)", v, e->name ? e->name : "none");
        if (!e->name) continue;
        CHECK(e->doc && strlen(e->doc) > 10, "%s has a doc line", e->name);
        CHECK(e->kind == ZT_ENV_SETTING || e->kind == ZT_ENV_HOOK, "%s: kind %d", e->name, (int)e->kind);
        CHECK(e->read == ZT_ENV_ONCE || e->read == ZT_ENV_EACH_USE, "%s: read %d", e->name, (int)e->read);
        for (int w = 0; w < v; w++)
            CHECK(strcmp(zt_env_info((zt_env_var)w)->name, e->name) != 0, "%s is in the table once", e->name);
        if (section) {  // the name followed by a character that cannot continue it
            char want[80];
            snprintf(want, sizeof want, "`%s`", e->name);
            CHECK(strstr(section, want) != NULL, "docs/design.md's hooks section names %s", want);
        }
    }
    free(design);
}

static void test_parsing(void) {
    const zt_env_var sw = ZT_ENV_CKPT_NO_RESERVE, num = ZT_ENV_CKPT_FAIL_AFTER_BYTES;  // EACH_USE both
    int64_t i = 7;
    double d = 7;
    unsetenv("ZT_CKPT_NO_RESERVE");
    unsetenv("ZT_CKPT_FAIL_AFTER_BYTES");
    CHECK(zt_env_str(sw) == NULL && !zt_env_on(sw), "unset: NULL, off");
    CHECK(!zt_env_i64(num, &i) && i == 7 && !zt_env_f64(num, &d) && d == 7, "unset: no number, *out untouched");
    setenv("ZT_CKPT_NO_RESERVE", "", 1);
    CHECK(zt_env_str(sw) && !*zt_env_str(sw) && !zt_env_on(sw), "empty: \"\", off");
    setenv("ZT_CKPT_NO_RESERVE", "0", 1);
    CHECK(!zt_env_on(sw), "\"0\": off");
    setenv("ZT_CKPT_NO_RESERVE", "yes", 1);
    CHECK(zt_env_on(sw), "\"yes\": on");
    setenv("ZT_CKPT_FAIL_AFTER_BYTES", "", 1);
    CHECK(!zt_env_i64(num, &i) && i == 7, "empty: no number");
    setenv("ZT_CKPT_FAIL_AFTER_BYTES", "30000x", 1);
    CHECK(zt_env_i64(num, &i) && i == 30000, "\"30000x\": 30000 (strtoll), got %lld", (long long)i);
    setenv("ZT_CKPT_FAIL_AFTER_BYTES", "-5", 1);
    CHECK(zt_env_i64(num, &i) && i == -5, "\"-5\": -5");
    setenv("ZT_CKPT_FAIL_AFTER_BYTES", "0.25", 1);
    CHECK(zt_env_f64(num, &d) && d == 0.25, "\"0.25\": 0.25");
    unsetenv("ZT_CKPT_NO_RESERVE");
    unsetenv("ZT_CKPT_FAIL_AFTER_BYTES");
}

static void test_once(void) {
    CHECK(zt_env_info(ZT_ENV_PROGRESS_INTERVAL)->read == ZT_ENV_ONCE, "ZT_PROGRESS_INTERVAL is read once");
    setenv("ZT_PROGRESS_INTERVAL", "3", 1);
    double d = 0;
    CHECK(zt_env_f64(ZT_ENV_PROGRESS_INTERVAL, &d) && d == 3, "first use: 3, got %g", d);
    setenv("ZT_PROGRESS_INTERVAL", "5", 1);
    CHECK(zt_env_f64(ZT_ENV_PROGRESS_INTERVAL, &d) && d == 3, "ONCE: still 3 after a change, got %g", d);
    unsetenv("ZT_PROGRESS_INTERVAL");
    CHECK(zt_env_str(ZT_ENV_PROGRESS_INTERVAL) && !strcmp(zt_env_str(ZT_ENV_PROGRESS_INTERVAL), "3"),
          "ONCE: still \"3\" after unset");
}

int main(void) {
    test_table();
    test_parsing();
    test_once();
    TEST_END();
}
