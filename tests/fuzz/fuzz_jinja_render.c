// libFuzzer harness: the Jinja renderer (data/jinja_eval.c, jinja_builtin.c, jinja_value.c).
// Input: a template, rendered with a fixed conversation (system, user, assistant with reasoning
// and a tool call, a tool result, tools with nested parameters) under small limits (10,000
// steps, 64 KiB of output, 32 MiB of values, depth 20). Properties: the render ends with a
// known status; a failure says why; a rendered text is within the output limit, and its
// {% generation %} spans are ordered pairs inside it (a span may lie in text a set/macro
// captured, so only their bounds are checked); rendering twice gives the same result.
#include "fuzz_util.h"
#include "data/jinja.h"

static const char conv[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "[{\"type\": \"text\", \"text\": \"Hi {{ x }} \\u00e9\"}]}, {\"role\": \"assistant\", \"content\": \"\", "
    "\"reasoning_content\": \"think\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
    "\"arguments\": {\"a\": 1, \"b\": 2.5, \"c\": [true, null], \"d\": {\"e\": \"\\u6771\"}}}}]}, {\"role\": \"tool\", "
    "\"content\": \"42\"}, {\"role\": \"assistant\", \"content\": \"done\"}], \"tools\": [{\"type\": \"function\", "
    "\"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
    "\"integer\"}}}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    zt_jinja *t = zt_jinja_parse((const char *)data, size, "fuzz.jinja");
    if (!t) return 0;
    zt_jinja_vars *v = zt_jinja_vars_new();
    FUZZ_ASSERT(zt_jinja_set_line(v, conv, sizeof conv - 1, NULL) == 0, "the fixed conversation: %s", zt_errmsg());
    zt_jinja_set_arg(v, "eos_token=\"<|im_end|>\"");
    zt_jinja_set_arg(v, "add_generation_prompt=false");
    zt_jinja_limits lim = {.max_steps = 10000, .max_output = 64 << 10, .max_memory = 32 << 20, .max_depth = 20,
                           .now = 1796644800};
    zt_jinja_result r = {0}, r2 = {0};
    int st = zt_jinja_render(t, v, &lim, &r);
    FUZZ_ASSERT(st >= ZT_JINJA_OK && st <= ZT_JINJA_LIMIT, "status %d", st);
    if (st != ZT_JINJA_OK) FUZZ_ASSERT(r.msg[0], "a failed render must say why (status %d)", st);
    else {
        FUZZ_ASSERT(r.n <= lim.max_output, "output %zu bytes past the limit", r.n);
        for (size_t i = 0; i < r.nspans; i++)
            FUZZ_ASSERT(r.spans[i][0] <= r.spans[i][1], "span %zu [%zu, %zu) reversed", i, r.spans[i][0], r.spans[i][1]);
    }
    int st2 = zt_jinja_render(t, v, &lim, &r2);
    FUZZ_ASSERT(st2 == st && r2.n == r.n && (st || !r.n || !memcmp(r.text, r2.text, r.n)) && r2.nspans == r.nspans,
                "two renders differ (status %d/%d, %zu/%zu bytes)", st, st2, r.n, r2.n);
    FUZZ_ASSERT(st != ZT_JINJA_OK || st2 != ZT_JINJA_OK || !strcmp(r.msg, r2.msg), "messages differ");
    zt_jinja_result_free(&r);
    zt_jinja_result_free(&r2);
    zt_jinja_vars_free(v);
    zt_jinja_free(t);
    return 0;
}
