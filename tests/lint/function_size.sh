#!/usr/bin/env bash
# No product function over MAX lines (default 150), counted by Universal Ctags from its first
# line (the signature's) to its closing brace. Product code: the layer folders, not tests/ or
# benchmarks/. Prints the ten longest; exits 1 naming every function over the limit, 77 (skipped)
# where ctags is missing. Usage: function_size.sh [ROOT] [MAX]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
max=${2:-150}
ctags=$(command -v ctags-universal || command -v ctags || true)
if [ -z "$ctags" ] || ! "$ctags" --version 2>/dev/null | grep -q Universal; then
    echo "SKIPPED: Universal Ctags not installed (scripts/install-deps.sh installs universal-ctags)"
    exit 77
fi
cd "$root"
dirs=(base kernels model data checkpoint engine train ops cli)
sizes=$("$ctags" -R --languages=C,C++ --langmap=C++:+.cu.cuh --kinds-C=f --kinds-C++=f --fields=+ne -f - "${dirs[@]}" |
    awk -F'\t' '{n = ""; e = ""
                 for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) n = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }
                 if (n != "" && e != "") printf "%d %s:%s %s\n", e - n + 1, $2, n, $1}' | sort -rn)
count=$(printf '%s\n' "$sizes" | grep -c . || true)
[ "$count" -ge 100 ] || { echo "FAIL: ctags found only $count functions under ${dirs[*]}"; exit 1; }
echo "$count product functions; the longest:"
printf '%s\n' "$sizes" | awk 'NR <= 10 { print "  " $0 }'
over=$(printf '%s\n' "$sizes" | awk -v m="$max" '$1 > m')
if [ -n "$over" ]; then
    echo "FAIL: over $max lines:"
    printf '%s\n' "$over" | sed 's/^/  /'
    exit 1
fi
echo "PASS: no product function over $max lines"
