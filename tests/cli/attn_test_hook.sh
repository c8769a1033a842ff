#!/usr/bin/env bash
# The attention dispatcher's test-only overrides (kernels/cuda/attention/dispatch.h) are unreachable
# from the product: every binary given that holds the dispatcher references zt_attn_test_overrides_get
# only weakly and defines no such function (tests/support/attention_test.c, which does, is linked
# into test programs only). Prints one line per binary; exits 1 if any defines it.
set -u
bad=0
for f in "$@"; do
    line=$(nm "$f" 2>/dev/null | grep -E ' zt_attn_test_overrides_get$' || true)
    case "$line" in
    *" w zt_attn_test_overrides_get") echo "$(basename "$f"): zt_attn_test_overrides_get weak, undefined" ;;
    "") echo "$(basename "$f"): no attention dispatcher" ;;
    *) echo "$(basename "$f"): DEFINES zt_attn_test_overrides_get ($line)"; bad=1 ;;
    esac
done
exit $bad
