// Loading a model's configuration from a file or a model directory. The type and its JSON
// codec are in model/hf_config.h (the training checkpoint, one layer up, uses them too).
// defines: zt_model_config_load
#ifndef ZT_CONFIG_H
#define ZT_CONFIG_H
#include "model/hf_config.h"

// path: a config.json file or a directory containing one.
int zt_model_config_load(zt_model_config *c, const char *path);
#endif
