// Device name -> dense bf16 peak (engine/device_peak.h).
#include "engine/device_peak.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    double peak;
} k_peaks[] = {
    {"B300", ZT_PEAK_BF16_B300},
    {"B200", ZT_PEAK_BF16_B200},
    {"H200", ZT_PEAK_BF16_H200},
    {"H100", ZT_PEAK_BF16_H100},
};

// Whether `word` is one of the alphanumeric words of s (case aside).
static int has_word(const char *s, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = s; *p; p++) {
        if (p > s && isalnum((unsigned char)p[-1])) continue;
        if (!strncasecmp(p, word, n) && !isalnum((unsigned char)p[n])) return 1;
    }
    return 0;
}

int zt_device_peak(const char *device, const char **preset, double *peak_flops) {
    if (!device || has_word(device, "PCIe") || has_word(device, "NVL")) return 0;
    for (size_t i = 0; i < sizeof k_peaks / sizeof k_peaks[0]; i++)
        if (has_word(device, k_peaks[i].name)) {
            if (preset) *preset = k_peaks[i].name;
            if (peak_flops) *peak_flops = k_peaks[i].peak;
            return 1;
        }
    return 0;
}
