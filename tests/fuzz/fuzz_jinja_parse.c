// libFuzzer harness: the Jinja template parser (data/jinja_lex.c, data/jinja_parse.c). Input:
// the template's bytes. Properties: a refused template says where, as FILE:LINE:COL: with a
// line and column inside the input; a template that parses parses again the same way (the
// parser keeps no state between templates).
#include "fuzz_util.h"
#include "data/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    zt_jinja *t = zt_jinja_parse((const char *)data, size, "fuzz.jinja");
    if (!t) {
        const char *m = zt_errmsg();
        int line = 0, col = 0;
        FUZZ_ASSERT(sscanf(m, "fuzz.jinja:%d:%d:", &line, &col) == 2, "a refusal must name FILE:LINE:COL, got: %s", m);
        size_t lines = 1;
        for (size_t i = 0; i < size; i++) lines += data[i] == '\n' || data[i] == '\r';
        FUZZ_ASSERT(line >= 1 && (size_t)line <= lines + 1 && col >= 1, "position %d:%d outside the input (%zu lines): %s",
                    line, col, lines, m);
        return 0;
    }
    int gen = zt_jinja_has_generation(t);
    zt_jinja_free(t);
    t = zt_jinja_parse((const char *)data, size, "fuzz.jinja");
    FUZZ_ASSERT(t != NULL && zt_jinja_has_generation(t) == gen, "a template that parsed once must parse again");
    zt_jinja_free(t);
    return 0;
}
