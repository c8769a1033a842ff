// Loads a Hugging Face Qwen3 config.json from a file or a model directory; parsing and
// validation are model/hf_config.c's.
// defines: zt_model_config_load
#include "model/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/common.h"

int zt_model_config_load(zt_model_config *c, const char *path) {
    char buf[4200];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, sizeof buf, "%s/config.json", path);
        path = buf;
    }
    char *text = zt_read_file(path, NULL);
    if (!text) return zt_err_prefix("reading the model config");
    int rc = zt_model_config_parse(c, text, path);
    free(text);
    return rc;
}
